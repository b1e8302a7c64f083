//! The store's counters as text for people: what `larder stats` prints and
//! a server answers to a `Stats` request, in one place.

use std::fmt::Write as _;

use crate::error::Result;
use crate::Kv;

/// The counters of the store `kv`, one group per line (what `larder
/// stats` prints).
pub fn report(kv: &Kv) -> Result<String> {
    let store = kv.store();
    let buckets = kv.buckets()?.len();
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(s, "store:            {}", store.dir().display());
    let _ = writeln!(s, "buckets:          {buckets}");
    let _ = writeln!(s, "log:              durable LSN {}", store.durable_lsn());
    let sp = store.space().stats();
    let _ = writeln!(
        s,
        "space:            {} containers ({} spare), {} total, {} allocated, {} free, {} pending free, \
         {} punched",
        sp.containers,
        sp.spare_containers,
        bytes(sp.bytes_total),
        bytes(sp.bytes_allocated),
        bytes(sp.bytes_free),
        bytes(sp.bytes_pending_free),
        bytes(sp.bytes_punched_now)
    );
    let _ = writeln!(
        s,
        "since this open:  {} allocations ({} extents), {} frees ({} released, {} pending), {} punches \
         ({}), {} containers created ({} inline)",
        sp.allocations,
        sp.extents_allocated,
        sp.frees,
        sp.frees_released,
        sp.deferred_frees_pending,
        sp.punches,
        bytes(sp.bytes_punched),
        sp.containers_created,
        sp.containers_created_inline
    );
    s.push_str(&health(&store.health()));
    let _ = writeln!(s, "index (activity since this open):");
    for line in store.index().stats().to_string().lines() {
        let _ = writeln!(s, "  {line}");
    }
    Ok(s)
}

/// The store's failure state and each background thread's state and last
/// error, one thread per line.
pub fn health(health: &larder_object::StoreHealth) -> String {
    let mut s = String::new();
    match &health.poisoned {
        Some(cause) => {
            let _ = writeln!(s, "writes:           refused since the first failure: {cause}");
        }
        None => {
            let _ = writeln!(s, "writes:           accepted");
        }
    }
    let _ = writeln!(s, "threads:");
    let width = health.threads.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in &health.threads {
        let _ = write!(s, "  {:width$}  {}", t.name, t.state);
        if t.retries > 0 {
            let _ = write!(s, ", {} retries", t.retries);
        }
        if let Some(e) = &t.last_error {
            let _ = write!(s, ", last error: {e}");
        }
        s.push('\n');
    }
    s
}

/// `n` bytes with a binary unit.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use larder_object::{StoreHealth, ThreadHealth, ThreadState};

    #[test]
    fn health_names_each_thread_its_state_and_last_error() {
        let thread = |name: &str, state, last_error: Option<&str>, retries| ThreadHealth {
            name: name.into(),
            state,
            last_error: last_error.map(str::to_string),
            retries,
        };
        let h = StoreHealth {
            poisoned: Some("sync_data of /s/log/1.log failed (errno 5): EIO".into()),
            threads: vec![
                thread("larder-checkpoint", ThreadState::Stopped, None, 0),
                thread("larder-spares", ThreadState::Retrying, Some("no space"), 3),
                thread("larder-log-flush", ThreadState::Failed, Some("sync_data of /s/log/1.log failed"), 0),
                thread("larder-flush", ThreadState::Running, None, 0),
            ],
        };
        assert_eq!(
            health(&h),
            "writes:           refused since the first failure: sync_data of /s/log/1.log failed (errno 5): EIO\n\
             threads:\n\
             \x20 larder-checkpoint  stopped\n\
             \x20 larder-spares      retrying, 3 retries, last error: no space\n\
             \x20 larder-log-flush   failed, last error: sync_data of /s/log/1.log failed\n\
             \x20 larder-flush       running\n"
        );
    }

    #[test]
    fn bytes_get_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(10 << 20), "10.0 MiB");
        assert_eq!(bytes(u64::MAX), "16777216.0 TiB");
    }
}
