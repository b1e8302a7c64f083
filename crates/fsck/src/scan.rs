//! The one pass over the index snapshot, and what happens when the index
//! cannot be read through.
//!
//! An index iterator ends at its first error (a run block failing its
//! checksum, a merge operand that does not fold). The failure is then
//! placed: a probe of the rest of the map being read says whether that map
//! lost keys (the probe fails or finds keys the pass did not get to) or
//! was read whole (the probe is empty: the failure lies in a later map).
//! A map that lost keys is marked incomplete, so the checks that would
//! only echo the missing keys are skipped, and the failure is reported
//! once. The pass goes on at the next map's prefix either way, so every
//! other map is still checked and the pass always ends (each attempt
//! starts past the one before).

use std::ops::Bound;

use larder_index::{IndexError, Snapshot};
use larder_object::meta::{prefix_end, Map};

use crate::error::{FsckError, Result};
use crate::problem::Problem;
use crate::report::{Phase, Progress};
use crate::visit::Visitor;

/// Keys between two progress reports.
const PROGRESS_EVERY: u64 = 4096;

/// Reads every key of `snapshot` into `visitor`.
pub(crate) fn run(snapshot: &Snapshot, visitor: &mut Visitor<'_>, progress: &mut dyn FnMut(Progress)) -> Result<()> {
    let mut start: Option<Vec<u8>> = None;
    loop {
        let mut last: Option<Vec<u8>> = None;
        let error = match read_from(snapshot, start.as_deref(), visitor, &mut last, progress) {
            Ok(()) => break,
            Err(e) => damage(e)?,
        };
        // Where the pass stood: past the last key read, or at the start of
        // this attempt (which it did not get past).
        let (from, lower) = match (last, start) {
            (Some(k), _) => (Some(k.clone()), Bound::Excluded(k)),
            (None, Some(s)) => (Some(s.clone()), Bound::Included(s)),
            (None, None) => (None, Bound::Unbounded),
        };
        let pos = from.as_deref().unwrap_or_default();
        let map = pos.first().and_then(|&b| Map::from_prefix(b));
        let resume = next_map_prefix(pos);
        // The rest of the map the pass was in, then the gap up to the next
        // map (keys there are no map's, but their loss is still reported).
        let map_end = map.and_then(|m| prefix_end(&[m.prefix()]));
        let in_map = match &map_end {
            Some(end) => lost_keys(snapshot, lower.clone(), Bound::Excluded(end.clone()))?,
            None => false,
        };
        let gap_start = map_end.map_or(lower, Bound::Included);
        let in_gap = lost_keys(snapshot, gap_start, resume.clone().map_or(Bound::Unbounded, Bound::Excluded))?;
        if let Some(map) = map.filter(|_| in_map) {
            visitor.model.incomplete.insert(map);
        }
        // A failure past the gap is reported by the attempt that meets it
        // there; past the last map there is none, so report it now.
        if in_map || in_gap || resume.is_none() {
            visitor.problems.push(Problem::IndexUnreadable { error, from, to: resume.clone() });
        }
        match resume {
            Some(r) => start = Some(r),
            None => break,
        }
    }
    progress(Progress { phase: Phase::Index, done: visitor.model.counts.keys, total: None });
    Ok(())
}

/// Whether keys between `lower` and `upper` could not be read: reading
/// there fails, or finds a key the failed pass did not get to.
fn lost_keys(snapshot: &Snapshot, lower: Bound<Vec<u8>>, upper: Bound<Vec<u8>>) -> Result<bool> {
    let probe = snapshot.range(lower.as_ref().map(Vec::as_slice), upper.as_ref().map(Vec::as_slice), true);
    match probe.map(|mut it| it.next()) {
        Ok(None) => Ok(false),
        Ok(Some(Ok(_))) => Ok(true),
        Ok(Some(Err(e))) | Err(e) => damage(e).map(|_| true),
    }
}

fn read_from(
    snapshot: &Snapshot,
    start: Option<&[u8]>,
    visitor: &mut Visitor<'_>,
    last: &mut Option<Vec<u8>>,
    progress: &mut dyn FnMut(Progress),
) -> std::result::Result<(), IndexError> {
    let lower = start.map_or(Bound::Unbounded, Bound::Included);
    for kv in snapshot.range(lower, Bound::Unbounded, true)? {
        let (key, value) = kv?;
        visitor.visit(&key, &value);
        *last = Some(key);
        let keys = visitor.model.counts.keys;
        if keys.is_multiple_of(PROGRESS_EVERY) {
            progress(Progress { phase: Phase::Index, done: keys, total: None });
        }
    }
    Ok(())
}

/// The error's text if it is damage to report (corrupt bytes, a newer
/// format, an operand that does not fold), or the fatal error to stop
/// with (the storage failing, the index closed or poisoned).
pub(crate) fn damage(e: IndexError) -> Result<String> {
    match e {
        IndexError::Io(_) | IndexError::Poisoned(_) | IndexError::Closed => Err(FsckError::Index(e)),
        other => Ok(other.to_string()),
    }
}

/// The prefix of the first map sorting after every key starting with
/// `key`'s first byte, if any.
fn next_map_prefix(key: &[u8]) -> Option<Vec<u8>> {
    let after = key.first().copied();
    Map::ALL.into_iter().map(Map::prefix).find(|&p| after.is_none_or(|a| p > a)).map(|p| vec![p])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resumes_at_the_next_map() {
        assert_eq!(next_map_prefix(&[]), Some(vec![0x01]));
        assert_eq!(next_map_prefix(&[0x01, b'a']), Some(vec![0x10]));
        assert_eq!(next_map_prefix(&[0x10]), Some(vec![0x20]));
        assert_eq!(next_map_prefix(&[0x15, 0xff]), Some(vec![0x20]));
        assert_eq!(next_map_prefix(&[0x50, 0, 0]), Some(vec![0x60]));
        assert_eq!(next_map_prefix(&[0x60, 2, 0]), Some(vec![0x70]));
        assert_eq!(next_map_prefix(&[0x70, 4, 0]), None);
        assert_eq!(next_map_prefix(&[0xff]), None);
    }
}
