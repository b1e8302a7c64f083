//! The calling thread's CPU priority, for background work that should take
//! only what CPU the rest leaves.

/// Sets the calling thread's nice value to 19, the lowest priority (on
/// Linux nice values are per thread; elsewhere this does nothing). An
/// unprivileged thread cannot raise it back, so call it on a thread that
/// ends with the work. Says whether it was done.
pub fn lowest_thread_priority() -> bool {
    #[cfg(target_os = "linux")]
    {
        #[allow(unsafe_code)]
        // SAFETY: gettid and setpriority read and write no memory of ours.
        let done = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) == 0 };
        done
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    #[test]
    #[cfg(target_os = "linux")]
    fn lowers_this_thread_only() {
        std::thread::spawn(|| {
            assert!(super::lowest_thread_priority());
            // The nice value is field 19 of the thread's stat, the 17th after
            // the closing parenthesis of its name.
            let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
            assert_eq!(fields[16], "19");
        })
        .join()
        .unwrap();
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
        assert_ne!(fields[16], "19");
    }
}
