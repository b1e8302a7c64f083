//! The calling thread's CPU time, for the profiling examples: on a machine
//! shared with other work a wall clock measures the neighbours as much as
//! the work.

/// This thread's CPU time, seconds.
pub fn cpu_secs() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    #[allow(unsafe_code)]
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t);
    }
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}
