//! sync_file_range(2), which neither rustix nor std offers: writing a
//! file's dirty pages to the device without a cache flush, so several
//! files' writes share the one flush a later fdatasync issues.

use std::os::fd::AsRawFd;

/// Writes the dirty pages of `[offset, offset + len)` of `file` to the
/// device: starts the writes, and with `wait` also waits for any already
/// under way and for these (WAIT_BEFORE | WRITE | WAIT_AFTER), reporting a
/// write error. No metadata is written and the device cache is not
/// flushed. A zero `len` means "to the end of the file".
pub(crate) fn sync_file_range(file: &std::fs::File, offset: u64, len: u64, wait: bool) -> std::io::Result<()> {
    let flags = if wait {
        libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER
    } else {
        libc::SYNC_FILE_RANGE_WRITE
    };
    let invalid = || std::io::Error::from(std::io::ErrorKind::InvalidInput);
    let offset = libc::off64_t::try_from(offset).map_err(|_| invalid())?;
    let len = libc::off64_t::try_from(len).map_err(|_| invalid())?;
    loop {
        #[allow(unsafe_code)]
        // SAFETY: a plain system call on a descriptor `file` keeps open for
        // the call's duration, with integer arguments only: no memory is
        // passed, so nothing the kernel does can break Rust's invariants.
        // (The one `unsafe` outside a mapping: there is no safe binding.)
        let r = unsafe { libc::sync_file_range(file.as_raw_fd(), offset, len, flags) };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
