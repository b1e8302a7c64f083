//! Regression for P7's note (review of crates/log): an `on_durable` hook
//! that appended to or synced its own log deadlocked, waiting for the group
//! its own thread was writing. Checks that such a call fails at once with
//! `LogError::Reentrant`, that the hook's error poisons the log as any hook
//! failure does, and that the outer append returns instead of hanging.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::{Arc, Mutex, OnceLock};

use common::{open, payload, small_options};
use larder_io::SimStorage;
use larder_log::{Log, LogError, Options};

#[test]
fn append_from_the_on_durable_hook_fails_instead_of_deadlocking() {
    let sim = SimStorage::new(71);
    let slot: Arc<OnceLock<Arc<Log>>> = Arc::new(OnceLock::new());
    let seen: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let (hook_slot, hook_seen) = (slot.clone(), seen.clone());
    let options = Options {
        on_durable: Some(Arc::new(move |lsn, _: &[u8]| {
            if lsn == 2 {
                let log = hook_slot.get().unwrap();
                let err = log.append(payload(99)).unwrap_err();
                hook_seen.lock().unwrap().push(format!("{err:?}"));
                let err = log.sync().unwrap_err();
                hook_seen.lock().unwrap().push(format!("{err:?}"));
                return Err(err.to_string());
            }
            Ok(())
        })),
        ..small_options()
    };
    let (log, _) = open(&sim, options, 0).unwrap();
    let log = Arc::new(log);
    slot.set(log.clone()).unwrap();
    assert_eq!(log.append(payload(1)).unwrap(), 1);
    let err = log.append(payload(2)).unwrap_err();
    assert!(matches!(err, LogError::Apply { lsn: 2, .. }), "{err}");
    assert_eq!(*seen.lock().unwrap(), vec!["Reentrant".to_string(), "Reentrant".to_string()]);
}
