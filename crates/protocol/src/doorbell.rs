//! The doorbell: one small memfd per server, shared by every client,
//! holding one futex word per worker, each on its own cache line.
//!
//! A worker that finds all its rings empty reads its word
//! ([`Doorbell::seen`]), sets its sleeping flag in every ring it serves
//! ([`crate::region::ServerRings::set_sleeping`]), checks the rings once
//! more, and sleeps on the word ([`Doorbell::wait`]) with a timeout. A
//! client that publishes a request and sees the flag set rings the bell
//! ([`Doorbell::ring`]): increments the word and wakes the worker. If the
//! increment lands between the worker's read and its sleep, the futex
//! sees a changed word and does not sleep.
//!
//! Every client can write the whole page. The server only sleeps on it,
//! always with a timeout, and never trusts its value: garbage written
//! there makes a worker's wait return early (a spurious wake-up, after
//! which it checks its rings and sleeps again) or makes a `wait` sleep
//! until its timeout — no worse than a client that sends no requests.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::TransportError;
use crate::futex::{self, Wake};
use crate::layout::{CACHE_LINE_BYTES, MAX_WORKERS, PAGE_BYTES};
use crate::mapping::{self, Mapping};

/// The mapped doorbell page(s). Unmapped on drop.
#[derive(Debug)]
pub struct Doorbell {
    map: Mapping,
    workers: u32,
}

/// Bytes of the doorbell memfd for `workers`: one cache line each, rounded
/// up to a page.
pub fn doorbell_bytes(workers: u32) -> u64 {
    (u64::from(workers) * u64::from(CACHE_LINE_BYTES)).next_multiple_of(PAGE_BYTES)
}

fn check_workers(workers: u32) -> Result<(), TransportError> {
    if workers == 0 || workers > MAX_WORKERS {
        return Err(crate::error::LayoutError::Workers { workers, max: MAX_WORKERS }.into());
    }
    Ok(())
}

impl Doorbell {
    /// Server: creates the sealed doorbell memfd for `workers` and maps it.
    /// The fd is passed to every client at its handshake.
    pub fn create(workers: u32) -> Result<(Doorbell, OwnedFd), TransportError> {
        check_workers(workers)?;
        let bytes = doorbell_bytes(workers);
        let fd = mapping::sealed_memfd("larder-doorbell", bytes, "create doorbell memfd")?;
        let map = Mapping::shared(&fd, bytes as usize, "map doorbell")?;
        Ok((Doorbell { map, workers }, fd))
    }

    /// Client: checks the memfd's size and seals and maps it.
    pub fn attach(fd: OwnedFd, workers: u32) -> Result<Doorbell, TransportError> {
        check_workers(workers)?;
        let bytes = doorbell_bytes(workers);
        mapping::check_sealed_memfd(&fd, bytes, "doorbell memfd")?;
        let map = Mapping::shared(&fd, bytes as usize, "map doorbell")?;
        Ok(Doorbell { map, workers })
    }

    /// Both sides in one process (tests).
    pub fn anonymous(workers: u32) -> Result<Doorbell, TransportError> {
        check_workers(workers)?;
        let map = Mapping::anonymous(doorbell_bytes(workers) as usize, "map anonymous doorbell")?;
        Ok(Doorbell { map, workers })
    }

    /// Workers the doorbell has words for.
    pub fn workers(&self) -> u32 {
        self.workers
    }

    fn word(&self, worker: u32) -> Result<&std::sync::atomic::AtomicU32, TransportError> {
        if worker >= self.workers {
            return Err(TransportError::NoSuchWorker { worker, workers: self.workers });
        }
        Ok(self.map.word32(worker as usize * CACHE_LINE_BYTES as usize))
    }

    /// Worker: the word's value now, read before setting the sleeping flags
    /// and checking the rings a last time; pass it to [`Doorbell::wait`].
    pub fn seen(&self, worker: u32) -> Result<u32, TransportError> {
        Ok(self.word(worker)?.load(Ordering::SeqCst))
    }

    /// Worker: sleeps while the word still holds `seen`, for at most
    /// `timeout` (never without one). Returns [`Wake::Woken`] when rung,
    /// changed or interrupted, [`Wake::TimedOut`] otherwise.
    pub fn wait(&self, worker: u32, seen: u32, timeout: Duration) -> Result<Wake, TransportError> {
        let word = self.word(worker)?;
        let timed_out = futex::wait(word, seen, timeout).map_err(|e| TransportError::io("doorbell wait", e))?;
        Ok(if timed_out { Wake::TimedOut } else { Wake::Woken })
    }

    /// Client: wakes `worker` (after publishing a request and seeing its
    /// sleeping flag set).
    pub fn ring(&self, worker: u32) -> Result<(), TransportError> {
        let word = self.word(worker)?;
        word.fetch_add(1, Ordering::SeqCst);
        futex::wake(word).map_err(|e: io::Error| TransportError::io("doorbell wake", e))
    }
}
