//! The check that a crashed image (of `larder_io::sim::crash_at_every_point`)
//! reopens with every acknowledged record, goes on, and opens clean
//! after a clean close.

use larder_io::SimStorage;
use larder_log::{Lsn, Options};

use super::{check_prefix, open, payload};

/// What a workload saw before a crash stopped it.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Highest LSN an append (or close) returned Ok for.
    pub acked: Lsn,
    /// Highest LSN handed out.
    pub appended: Lsn,
}

/// Reopens `image` with the index covering `covered`: the log ends at
/// least at the last acknowledged record and at most at the last appended
/// one; it takes three more records, and after a clean close opens clean
/// with nothing to replay.
pub fn check_goes_on(image: &SimStorage, options: &Options, covered: Lsn, out: &Outcome, what: &str) {
    let (log, replayed) =
        open(image, options.clone(), covered).unwrap_or_else(|e| panic!("{what}: open: {e} ({out:?})"));
    let end = check_prefix(&replayed, covered);
    assert!(end >= out.acked, "{what}: acknowledged {} but the log ends at {end} ({out:?})", out.acked);
    assert!(end <= out.appended.max(covered), "{what}: log ends at {end}, beyond what was appended ({out:?})");
    for lsn in end + 1..=end + 3 {
        assert_eq!(log.append(payload(lsn)).unwrap(), lsn, "{what}");
    }
    log.close().unwrap();
    let (log, replayed) = open(image, options.clone(), end + 3).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
    assert!(replayed.is_empty(), "{what}");
    assert!(log.recovery_report().clean, "{what}: a clean close did not open clean");
}
