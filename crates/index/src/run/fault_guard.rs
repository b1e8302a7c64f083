//! Makes a fault on a mapped run's page an error instead of a crash.
//!
//! A page of a file mapping past the file's end faults (SIGBUS) when
//! touched: a run file cut short under the open index (by another
//! program; the index never changes a run it wrote) would kill the
//! process. Checking the file's length before every read (one `fstat`)
//! cost about a third of a point get, and a cut racing the check still
//! faulted. Instead, each run's mapping is registered here, and a SIGBUS
//! handler (installed once per process, chained to the one it replaces)
//! that finds the faulting address in a registered mapping maps a page of
//! zeros over the faulting page, counts the fault against the mapping and
//! returns: the load runs again and reads zeros. A reader checks the
//! count after its reads ([`Guard::faulted`], one atomic load) and turns
//! what it read into an error naming the file. A fault at an address no
//! registered mapping holds goes to the handler that was there before
//! (Rust's own, for stack overflows), or kills the process as before.
//!
//! The bytes of a cut file's last page past the new end read as zeros
//! without a fault; `reader` catches those by the block's entry count,
//! which never reads zero in a block that passed its checks.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

/// Mappings that can be guarded at once in a process (open runs of every
/// index); a mapping that finds no free slot is not guarded, and its reads
/// fall back to checking the file's length first.
const SLOTS: usize = 4096;

/// One registered mapping: `[start, end)` of the address space (`start`
/// 0 when the slot is free) and the faults taken in it.
struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    faults: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot { start: AtomicUsize::new(0), end: AtomicUsize::new(0), faults: AtomicU64::new(0) };
static SLOT_TABLE: [Slot; SLOTS] = [FREE; SLOTS];
/// Slots ever used: the handler searches only these.
static SLOTS_USED: AtomicUsize = AtomicUsize::new(0);
static PAGE_BYTES: AtomicUsize = AtomicUsize::new(0);
static INSTALL: Once = Once::new();
/// Whether the handler is installed (set once, by `INSTALL`).
static INSTALLED: AtomicUsize = AtomicUsize::new(0);

/// The SIGBUS action replaced, written once before the handler is
/// installed and read only by the handler.
struct Previous(std::cell::UnsafeCell<std::mem::MaybeUninit<libc::sigaction>>);
// SAFETY: written once inside `INSTALL` before the handler that reads it
// is installed (sigaction is a full barrier: a system call), never after.
#[allow(unsafe_code)]
unsafe impl Sync for Previous {}
static PREVIOUS: Previous = Previous(std::cell::UnsafeCell::new(std::mem::MaybeUninit::uninit()));

/// A mapping's registration; unregisters when dropped. Drop it before the
/// mapping is unmapped.
#[derive(Debug)]
pub(crate) struct Guard {
    slot: usize,
}

impl Guard {
    /// Registers the mapping of `bytes`; `None` if the handler could not be
    /// installed or every slot is taken (the caller then checks the file's
    /// length before each read).
    pub(crate) fn register(bytes: &[u8]) -> Option<Guard> {
        install();
        if INSTALLED.load(Ordering::Acquire) == 0 || bytes.is_empty() {
            return None;
        }
        let start = bytes.as_ptr() as usize;
        let end = start.checked_add(bytes.len())?;
        for (i, slot) in SLOT_TABLE.iter().enumerate() {
            // Claim a free slot by writing its start; `end` is written
            // after, so the handler reads `end` only after seeing `start`
            // and checks `start` again (a slot being filled is skipped).
            if slot.start.compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                slot.faults.store(0, Ordering::Relaxed);
                slot.end.store(end, Ordering::Release);
                slot.start.store(start, Ordering::Release);
                SLOTS_USED.fetch_max(i + 1, Ordering::AcqRel);
                return Some(Guard { slot: i });
            }
        }
        None
    }

    /// Whether a read of the mapping has faulted since it was registered
    /// (its file was cut short under it, or a page could not be read). The
    /// faulting pages now read as zeros: every read since the fault is
    /// suspect, and the mapping must not be trusted again.
    pub(crate) fn faulted(&self) -> bool {
        SLOT_TABLE[self.slot].faults.load(Ordering::Acquire) != 0
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let slot = &SLOT_TABLE[self.slot];
        slot.start.store(usize::MAX, Ordering::Release);
        slot.end.store(0, Ordering::Release);
        slot.start.store(0, Ordering::Release);
    }
}

fn install() {
    INSTALL.call_once(|| {
        #[allow(unsafe_code)]
        // SAFETY: sysconf and sigaction with valid pointers; PREVIOUS is
        // written before the handler that reads it is installed.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            let Ok(page) = usize::try_from(page) else { return };
            if !page.is_power_of_two() {
                return;
            }
            PAGE_BYTES.store(page, Ordering::Release);
            let previous = (*PREVIOUS.0.get()).as_mut_ptr();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), previous) != 0 {
                return;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0 {
                INSTALLED.store(1, Ordering::Release);
            }
        }
    });
}

/// The slot whose mapping holds `addr`, if any. Only atomic loads: safe in
/// a signal handler.
fn slot_holding(addr: usize) -> Option<&'static Slot> {
    let used = SLOTS_USED.load(Ordering::Acquire).min(SLOTS);
    SLOT_TABLE[..used].iter().find(|slot| {
        let start = slot.start.load(Ordering::Acquire);
        if start == 0 || start == usize::MAX || addr < start {
            return false;
        }
        let end = slot.end.load(Ordering::Acquire);
        addr < end && slot.start.load(Ordering::Acquire) == start
    })
}

#[allow(unsafe_code)]
extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE_BYTES.load(Ordering::Acquire);
    if let Some(slot) = slot_holding(addr) {
        let at = addr & !(page - 1);
        // SAFETY: the page lies in a registered mapping, which its owner
        // keeps mapped (and registered) while it reads it; replacing it
        // with private zeros changes only what those reads see, and the
        // owner unmaps the whole range (this page with it) when done.
        // mmap is a plain system call, safe in a signal handler.
        let mapped = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if mapped != libc::MAP_FAILED {
            slot.faults.fetch_add(1, Ordering::AcqRel);
            return;
        }
    }
    // Not ours (or the page could not be replaced): what was there before.
    // SAFETY: PREVIOUS was written before this handler was installed.
    let previous = unsafe { (*PREVIOUS.0.get()).assume_init_ref() };
    let handler = previous.sa_sigaction;
    if handler != libc::SIG_DFL && handler != libc::SIG_IGN {
        if previous.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: an SA_SIGINFO handler has this signature.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(handler) };
            f(signal, info, context);
        } else {
            // SAFETY: a plain handler has this signature.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
            f(signal);
        }
        return;
    }
    // The default action: restore it and return, so the load faults
    // again and the process dies as it would have without this handler.
    // SAFETY: sigaction with a valid, zeroed action is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use larder_io::{FileRef, Mapping, OpenOptions, RealStorage, Storage};

    /// A file of `bytes` bytes of `fill` in a fresh directory, opened for
    /// writing through the storage trait, and its mapping.
    fn mapped_file(dir: &tempfile::TempDir, bytes: usize, fill: u8) -> (FileRef, std::sync::Arc<Mapping>) {
        let storage = RealStorage::new();
        let file = storage.open(&dir.path().join("run"), OpenOptions::CREATE_NEW).unwrap();
        larder_io::write_all_at(&*file, &vec![fill; bytes], 0).unwrap();
        let map = file.map().unwrap().expect("real files map");
        (file, map)
    }

    /// A file mapped, cut to a third of a page past a page boundary: loads
    /// past the end read zeros and count a fault; loads before do not.
    #[test]
    fn a_load_past_a_cut_reads_zeros_and_counts_a_fault() {
        let page = {
            install();
            PAGE_BYTES.load(Ordering::Acquire)
        };
        let dir = tempfile::tempdir().unwrap();
        let (file, map) = mapped_file(&dir, page * 4, 7);
        let guard = Guard::register(&map).unwrap();
        assert_eq!(std::hint::black_box(map[page * 3]), 7);
        assert!(!guard.faulted());
        file.set_len((page + page / 3) as u64).unwrap();
        // Before the cut: intact. In the cut page past the end: zeros, no
        // fault (the kernel zeroes the page's tail). Past that page: a fault.
        assert_eq!(std::hint::black_box(map[page]), 7);
        assert_eq!(std::hint::black_box(map[page + page / 2]), 0);
        assert!(!guard.faulted());
        assert_eq!(std::hint::black_box(map[page * 3 + 5]), 0);
        assert!(guard.faulted());
        // The replaced page stays readable: a second load does not fault.
        assert_eq!(std::hint::black_box(map[page * 3 + 6]), 0);
        drop(guard);
        drop(map);
        // The file itself is as cut.
        let mut byte = [0u8; 1];
        larder_io::read_exact_at(&*file, &mut byte, page as u64).unwrap();
        assert_eq!(byte[0], 7);
    }

    #[test]
    fn slots_are_reused_after_a_guard_drops() {
        let dir = tempfile::tempdir().unwrap();
        let (_file, map) = mapped_file(&dir, 100, 1);
        for _ in 0..SLOTS + 10 {
            let guard = Guard::register(&map).unwrap();
            assert!(!guard.faulted());
        }
        let held: Vec<Guard> = (0..8).map(|_| Guard::register(&map).unwrap()).collect();
        let slots: std::collections::BTreeSet<usize> = held.iter().map(|g| g.slot).collect();
        assert_eq!(slots.len(), 8);
    }
}
