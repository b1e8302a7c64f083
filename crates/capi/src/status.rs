//! How a call reports failure to C: `errno` and a thread-local message,
//! and the boundary that keeps a panic from crossing into C.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use client::ClientError;

/// Why a call failed: the errno it sets and the message
/// `larder_last_error()` gives.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) errno: i32,
    pub(crate) message: String,
}

impl Failure {
    /// A failure with `errno` and `message`.
    pub(crate) fn new(errno: i32, message: impl Into<String>) -> Failure {
        Failure { errno, message: message.into() }
    }

    /// EINVAL, for an argument refused before anything was sent.
    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(libc::EINVAL, message)
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        Failure { errno: e.errno(), message: e.to_string() }
    }
}

/// A call's result inside the library.
pub(crate) type Outcome<T> = Result<T, Failure>;

thread_local! {
    /// The message of this thread's last failed call.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    /// The errno of this thread's last failed call, kept apart from
    /// `errno`, which any later libc call may change.
    static LAST_ERRNO: Cell<i32> = const { Cell::new(0) };
}

/// The errno of this thread's last failed call, or 0 if none has failed.
pub(crate) fn last_errno() -> i32 {
    LAST_ERRNO.try_with(Cell::get).unwrap_or(0)
}

/// Records `failure` of the call `function` for this thread: sets errno
/// and the message.
fn record(function: &str, failure: Failure) {
    let text = format!("{function}: {}", failure.message).replace('\0', "\\0");
    // The NULs were replaced just above, so this cannot fail; an empty
    // message would still leave errno right.
    let text = CString::new(text).unwrap_or_default();
    // During the thread's teardown the message is lost; errno is not.
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = text);
    let _ = LAST_ERRNO.try_with(|last| last.set(failure.errno));
    errno::set_errno(errno::Errno(failure.errno));
}

/// Runs the body of the exported function `function`: its value on
/// success; on failure (or a panic, as EIO) records errno and the message
/// and returns `failed`. No panic unwinds past this.
pub(crate) fn boundary<T>(function: &str, failed: T, body: impl FnOnce() -> Outcome<T>) -> T {
    // The body's state after a panic is not looked at again: the call
    // fails, and the library's locks (parking_lot) do not poison.
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => value,
        Ok(Err(failure)) => {
            record(function, failure);
            failed
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            record(function, Failure::new(libc::EIO, format!("internal error in the library: {what}")));
            failed
        }
    }
}

/// The message of the last call that failed on this thread (the function
/// name, what went wrong and the errno's text), or an empty string if none
/// has. The string stays valid until the next failing call on this thread;
/// copy it to keep it. Never NULL.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_last_error() -> *const c_char {
    LAST_ERROR.try_with(|last| last.borrow().as_ptr()).unwrap_or(c"".as_ptr())
}

#[cfg(test)]
mod tests {
    use super::{boundary, larder_last_error, Failure};

    fn message() -> String {
        #[allow(unsafe_code)]
        // SAFETY: larder_last_error never returns NULL, and the string
        // lives until the next failure on this thread; it is copied here.
        let text = unsafe { std::ffi::CStr::from_ptr(larder_last_error()) };
        text.to_string_lossy().into_owned()
    }

    #[test]
    fn a_panic_is_caught_and_fails_with_eio() {
        let got = boundary("larder_test", -1, || -> super::Outcome<i32> { panic!("boom {}", 42) });
        assert_eq!((got, errno::errno().0), (-1, libc::EIO));
        assert_eq!(message(), "larder_test: internal error in the library: boom 42");
    }

    #[test]
    fn a_failure_sets_errno_and_the_message_and_a_success_returns_the_value() {
        let got = boundary("larder_test", -1, || Err(Failure::new(libc::ENOSPC, "full\0up")));
        assert_eq!((got, errno::errno().0), (-1, libc::ENOSPC));
        assert_eq!(message(), "larder_test: full\\0up", "a NUL in a message is shown, not cut at");
        assert_eq!(boundary("larder_test", -1, || Ok(7)), 7);
        assert_eq!(message(), "larder_test: full\\0up", "a success leaves the message");
    }
}
