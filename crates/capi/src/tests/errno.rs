//! The C API's errors, by calling its exported functions from Rust against
//! a real `larder serve`: ENOENT, EEXIST, EACCES (as another user), EBADF
//! for file numbers that are not open, EINVAL for NULL and bad arguments,
//! ENOTEMPTY, ENOTDIR, ENOMEM, ENOTCONN after the server died; every
//! failure returns -1 or NULL, sets errno and a thread-local message
//! naming the call; KV values through buffers; and one client used by
//! many threads at once.

use std::ffi::{c_int, CStr, CString};
use std::os::unix::process::CommandExt;
use std::ptr::{null, null_mut};

use super::common::Served;
use crate::*;

/// A client through the C API, closed when dropped; safe wrappers over
/// the calls the tests make with valid arguments.
struct Api {
    client: &'static LarderClient,
}

/// A C string of `s`.
fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// This thread's errno.
fn errno() -> i32 {
    errno::errno().0
}

/// This thread's last error message.
#[allow(unsafe_code)]
fn last_error() -> String {
    // SAFETY: larder_last_error never returns NULL, and its string lives
    // until the next failing call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(larder_last_error()) }.to_string_lossy().into_owned()
}

/// Requires that a call returned `failed` and set errno to `expected`,
/// with a message that names `function`.
#[track_caller]
fn refused<T: PartialEq + std::fmt::Debug>(got: T, failed: T, expected: i32, function: &str) {
    let errno = errno();
    assert_eq!(got, failed, "{function} did not fail");
    assert_eq!(
        errno,
        expected,
        "{function}: errno {errno} ({}), expected {expected} ({}); message {:?}",
        std::io::Error::from_raw_os_error(errno),
        std::io::Error::from_raw_os_error(expected),
        last_error()
    );
    assert!(last_error().starts_with(&format!("{function}: ")), "{function}: message {:?}", last_error());
}

#[allow(unsafe_code)]
impl Api {
    /// Connects to `path` (a store or a socket).
    fn connect(path: &str) -> Api {
        // SAFETY: a NUL-terminated string that lives for the call.
        let client = unsafe { larder_connect(c(path).as_ptr()) };
        assert!(!client.is_null(), "larder_connect {path}: {}", last_error());
        // SAFETY: not NULL, so a live client; it stays live until `drop`
        // disconnects it, and the reference does not outlive `self`.
        Api { client: unsafe { &*client } }
    }

    fn raw(&self) -> *const LarderClient {
        self.client
    }

    fn mkdir(&self, path: &str, mode: u32) -> c_int {
        // SAFETY: a live client and a NUL-terminated string.
        unsafe { larder_mkdir(self.raw(), c(path).as_ptr(), mode) }
    }

    fn open(&self, path: &str, flags: c_int, mode: u32) -> c_int {
        // SAFETY: a live client and a NUL-terminated string.
        unsafe { larder_open(self.raw(), c(path).as_ptr(), flags, mode) }
    }

    fn close(&self, fd: c_int) -> c_int {
        // SAFETY: a live client.
        unsafe { larder_close(self.raw(), fd) }
    }

    fn pwrite(&self, fd: c_int, data: &[u8], offset: i64) -> i64 {
        // SAFETY: a live client and `data.len()` readable bytes.
        unsafe { larder_pwrite(self.raw(), fd, data.as_ptr().cast(), data.len(), offset) }
    }

    fn pread(&self, fd: c_int, out: &mut [u8], offset: i64) -> i64 {
        // SAFETY: a live client and `out.len()` writable bytes.
        unsafe { larder_pread(self.raw(), fd, out.as_mut_ptr().cast(), out.len(), offset) }
    }

    fn fsync(&self, fd: c_int) -> c_int {
        // SAFETY: a live client.
        unsafe { larder_fsync(self.raw(), fd) }
    }

    fn fstat(&self, fd: c_int) -> (c_int, LarderStat) {
        let mut st = LarderStat::default();
        // SAFETY: a live client and a writable struct.
        (unsafe { larder_fstat(self.raw(), fd, &mut st) }, st)
    }

    fn stat(&self, path: &str) -> (c_int, LarderStat) {
        let mut st = LarderStat::default();
        // SAFETY: a live client, a NUL-terminated string, a writable struct.
        (unsafe { larder_stat(self.raw(), c(path).as_ptr(), &mut st) }, st)
    }

    fn unlink(&self, path: &str) -> c_int {
        // SAFETY: a live client and a NUL-terminated string.
        unsafe { larder_unlink(self.raw(), c(path).as_ptr()) }
    }

    fn rmdir(&self, path: &str) -> c_int {
        // SAFETY: a live client and a NUL-terminated string.
        unsafe { larder_rmdir(self.raw(), c(path).as_ptr()) }
    }

    fn rename(&self, from: &str, to: &str) -> c_int {
        // SAFETY: a live client and NUL-terminated strings.
        unsafe { larder_rename(self.raw(), c(from).as_ptr(), c(to).as_ptr()) }
    }

    fn create_bucket(&self, bucket: &str) -> c_int {
        // SAFETY: a live client and a NUL-terminated string.
        unsafe { larder_kv_create_bucket(self.raw(), c(bucket).as_ptr()) }
    }

    fn put(&self, bucket: &str, key: &str, value: &[u8]) -> c_int {
        // SAFETY: a live client, NUL-terminated strings, readable bytes.
        unsafe {
            larder_kv_put(
                self.raw(),
                c(bucket).as_ptr(),
                c(key).as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                LARDER_DURABLE,
            )
        }
    }

    /// The value's length and its first `capacity` bytes.
    fn get(&self, bucket: &str, key: &str, capacity: usize) -> (c_int, usize, Vec<u8>) {
        let mut out = vec![0u8; capacity];
        let mut length = usize::MAX;
        // SAFETY: a live client, NUL-terminated strings, `capacity`
        // writable bytes and a writable length.
        let result = unsafe {
            larder_kv_get(
                self.raw(),
                c(bucket).as_ptr(),
                c(key).as_ptr(),
                out.as_mut_ptr().cast(),
                capacity,
                &mut length,
            )
        };
        (result, length, out)
    }

    fn delete(&self, bucket: &str, key: &str) -> c_int {
        // SAFETY: a live client and NUL-terminated strings.
        unsafe { larder_kv_delete(self.raw(), c(bucket).as_ptr(), c(key).as_ptr(), LARDER_BUFFERED) }
    }

    /// The names in a directory, or the errno of opendir.
    fn list(&self, path: &str) -> Result<Vec<(String, u64, u8)>, i32> {
        // SAFETY: a live client and a NUL-terminated string.
        let dir = unsafe { larder_opendir(self.raw(), c(path).as_ptr()) };
        if dir.is_null() {
            return Err(errno());
        }
        let mut names = Vec::new();
        // SAFETY: an all-zero `larder_dirent` is a valid value (integers
        // and a char array).
        let mut entry: LarderDirent = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: an open stream and a writable entry.
            match unsafe { larder_readdir(dir, &mut entry) } {
                1 => {
                    // SAFETY: readdir NUL-terminates the name inside the array.
                    let name = unsafe { CStr::from_ptr(entry.name.as_ptr()) };
                    names.push((name.to_string_lossy().into_owned(), entry.ino, entry.kind));
                }
                0 => break,
                _ => panic!("larder_readdir: {}", last_error()),
            }
        }
        // SAFETY: an open stream, closed once.
        assert_eq!(unsafe { larder_closedir(dir) }, 0);
        names.sort();
        Ok(names)
    }
}

impl Drop for Api {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: the client from `connect`, disconnected once; `self` and
        // its reference end here.
        let closed = unsafe { larder_disconnect(self.client as *const LarderClient as *mut LarderClient) };
        assert_eq!(closed, 0);
    }
}

#[test]
fn missing_names_are_enoent() {
    let mut served = Served::start(true);
    let api = Api::connect(served.socket.to_str().unwrap());
    refused(api.open("/nothing", libc::O_RDONLY, 0), -1, libc::ENOENT, "larder_open");
    refused(api.open("/no/dir/f", libc::O_RDWR | libc::O_CREAT, 0o644), -1, libc::ENOENT, "larder_open");
    refused(api.stat("/nothing").0, -1, libc::ENOENT, "larder_stat");
    refused(api.unlink("/nothing"), -1, libc::ENOENT, "larder_unlink");
    refused(api.rmdir("/nothing"), -1, libc::ENOENT, "larder_rmdir");
    refused(api.rename("/nothing", "/else"), -1, libc::ENOENT, "larder_rename");
    refused(api.mkdir("/no/dir", 0o755), -1, libc::ENOENT, "larder_mkdir");
    assert_eq!(api.list("/nothing"), Err(libc::ENOENT));
    refused(api.put("nobucket", "k", b"v"), -1, libc::ENOENT, "larder_kv_put");
    assert_eq!(api.create_bucket("b"), 0, "{}", last_error());
    refused(api.get("b", "nokey", 8).0, -1, libc::ENOENT, "larder_kv_get");
    refused(api.delete("b", "nokey"), -1, libc::ENOENT, "larder_kv_delete");

    // Connecting where no server is.
    let nowhere = c(served.dir.path().join("nowhere").to_str().unwrap());
    // SAFETY: a NUL-terminated string.
    #[allow(unsafe_code)]
    let client = unsafe { larder_connect(nowhere.as_ptr()) };
    refused(client, null_mut(), libc::ENOENT, "larder_connect");
    drop(api);
    served.stop();
}

#[test]
fn existing_names_are_eexist() {
    let mut served = Served::start(true);
    let api = Api::connect(served.socket.to_str().unwrap());
    assert_eq!(api.mkdir("/d", 0o755), 0, "{}", last_error());
    let fd = api.open("/d/f", libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o600);
    assert!(fd >= 0, "{}", last_error());
    refused(api.mkdir("/d", 0o755), -1, libc::EEXIST, "larder_mkdir");
    refused(api.mkdir("/d/f", 0o755), -1, libc::EEXIST, "larder_mkdir");
    refused(api.open("/d/f", libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o644), -1, libc::EEXIST, "larder_open");
    assert_eq!(api.create_bucket("b"), 0, "{}", last_error());
    refused(api.create_bucket("b"), -1, libc::EEXIST, "larder_kv_create_bucket");
    // The refused calls changed nothing: the file is as it was.
    assert_eq!(api.pwrite(fd, b"abc", 0), 3);
    let (ok, st) = api.stat("/d/f");
    assert_eq!((ok, st.size, st.mode & 0o7777), (0, 3, 0o600));
    // Other errnos of names: a directory not empty, a path through a file.
    refused(api.rmdir("/d"), -1, libc::ENOTEMPTY, "larder_rmdir");
    refused(api.mkdir("/d/f/x", 0o755), -1, libc::ENOTDIR, "larder_mkdir");
    refused(api.unlink("/d"), -1, libc::EISDIR, "larder_unlink");
    assert_eq!(api.close(fd), 0);
    drop(api);
    served.stop();
}

#[test]
fn file_numbers_not_open_are_ebadf() {
    let mut served = Served::start(true);
    let api = Api::connect(served.socket.to_str().unwrap());
    let mut buf = [0u8; 4];
    for fd in [-1, 0, 7, c_int::MAX] {
        refused(api.pread(fd, &mut buf, 0), -1, libc::EBADF, "larder_pread");
        refused(api.pwrite(fd, b"x", 0), -1, libc::EBADF, "larder_pwrite");
        refused(api.fsync(fd), -1, libc::EBADF, "larder_fsync");
        refused(api.fstat(fd).0, -1, libc::EBADF, "larder_fstat");
        refused(api.close(fd), -1, libc::EBADF, "larder_close");
    }
    // A closed number is not open any more, and the lowest free number
    // is handed out again.
    let first = api.open("/a", libc::O_RDWR | libc::O_CREAT, 0o644);
    let second = api.open("/b", libc::O_RDWR | libc::O_CREAT, 0o644);
    assert_eq!((first, second), (0, 1), "{}", last_error());
    assert_eq!(api.close(first), 0);
    refused(api.pwrite(first, b"x", 0), -1, libc::EBADF, "larder_pwrite");
    refused(api.close(first), -1, libc::EBADF, "larder_close");
    assert_eq!(api.open("/b", libc::O_RDONLY, 0), 0, "the lowest free number comes back");
    // A number of one client means nothing to another.
    let other = Api::connect(served.socket.to_str().unwrap());
    refused(other.fsync(second), -1, libc::EBADF, "larder_fsync");
    drop((api, other));
    served.stop();
}

#[test]
#[allow(unsafe_code)]
fn null_pointers_and_bad_arguments_are_einval() {
    let mut served = Served::start(true);
    let api = Api::connect(served.socket.to_str().unwrap());
    let path = c("/f");
    let mut st = LarderStat::default();
    let mut buf = [0u8; 8];
    let mut length = 0usize;
    // SAFETY (all the calls below): every pointer is NULL, a live client
    // or stream, a NUL-terminated string, or a writable place of the size
    // passed.
    unsafe {
        refused(larder_connect(null()), null_mut(), libc::EINVAL, "larder_connect");
        refused(larder_disconnect(null_mut()), -1, libc::EINVAL, "larder_disconnect");
        refused(larder_open(null(), path.as_ptr(), libc::O_RDONLY, 0), -1, libc::EINVAL, "larder_open");
        refused(larder_open(api.raw(), null(), libc::O_RDONLY, 0), -1, libc::EINVAL, "larder_open");
        refused(larder_close(null(), 0), -1, libc::EINVAL, "larder_close");
        refused(larder_stat(api.raw(), null(), &mut st), -1, libc::EINVAL, "larder_stat");
        refused(larder_stat(api.raw(), path.as_ptr(), null_mut()), -1, libc::EINVAL, "larder_stat");
        refused(larder_lstat(null(), path.as_ptr(), &mut st), -1, libc::EINVAL, "larder_lstat");
        refused(larder_fstat(api.raw(), 0, null_mut()), -1, libc::EINVAL, "larder_fstat");
        refused(larder_mkdir(api.raw(), null(), 0o755), -1, libc::EINVAL, "larder_mkdir");
        refused(larder_unlink(api.raw(), null()), -1, libc::EINVAL, "larder_unlink");
        refused(larder_rmdir(null(), path.as_ptr()), -1, libc::EINVAL, "larder_rmdir");
        refused(larder_rename(api.raw(), path.as_ptr(), null()), -1, libc::EINVAL, "larder_rename");
        refused(larder_opendir(api.raw(), null()), null_mut(), libc::EINVAL, "larder_opendir");
        refused(larder_readdir(null(), null_mut()), -1, libc::EINVAL, "larder_readdir");
        refused(larder_closedir(null_mut()), -1, libc::EINVAL, "larder_closedir");
        refused(larder_buffer_alloc(null(), 64), null_mut(), libc::EINVAL, "larder_buffer_alloc");
        refused(larder_buffer_data(null()), null_mut(), libc::EINVAL, "larder_buffer_data");
        refused(larder_buffer_len(null()), 0, libc::EINVAL, "larder_buffer_len");
        refused(larder_buffer_free(null_mut()), -1, libc::EINVAL, "larder_buffer_free");
        refused(
            larder_kv_put(api.raw(), null(), path.as_ptr(), buf.as_ptr().cast(), 1, 1),
            -1,
            libc::EINVAL,
            "larder_kv_put",
        );
        refused(
            larder_kv_get(api.raw(), path.as_ptr(), path.as_ptr(), buf.as_mut_ptr().cast(), 8, null_mut()),
            -1,
            libc::EINVAL,
            "larder_kv_get",
        );
        refused(
            larder_kv_get(api.raw(), path.as_ptr(), path.as_ptr(), null_mut(), 8, &mut length),
            -1,
            libc::EINVAL,
            "larder_kv_get",
        );
        refused(larder_kv_delete(api.raw(), path.as_ptr(), null(), 1), -1, libc::EINVAL, "larder_kv_delete");
        refused(larder_kv_create_bucket(api.raw(), null()), -1, libc::EINVAL, "larder_kv_create_bucket");

        let fd = api.open("/f", libc::O_RDWR | libc::O_CREAT, 0o644);
        assert!(fd >= 0, "{}", last_error());
        refused(larder_pread(api.raw(), fd, null_mut(), 8, 0), -1, libc::EINVAL, "larder_pread");
        refused(larder_pwrite(api.raw(), fd, null(), 8, 0), -1, libc::EINVAL, "larder_pwrite");
        refused(larder_pread(api.raw(), fd, buf.as_mut_ptr().cast(), usize::MAX, 0), -1, libc::EINVAL, "larder_pread");
        refused(api.pread(fd, &mut buf, -1), -1, libc::EINVAL, "larder_pread");
        refused(api.pwrite(fd, b"x", -5), -1, libc::EINVAL, "larder_pwrite");

        // Flags, modes and durabilities beyond what the calls take.
        refused(
            api.open("/g", libc::O_RDWR | libc::O_CREAT | libc::O_DIRECTORY, 0o644),
            -1,
            libc::EINVAL,
            "larder_open",
        );
        refused(api.open("/g", 3, 0), -1, libc::EINVAL, "larder_open");
        refused(api.open("/g", libc::O_RDWR | libc::O_CREAT, 0o100644), -1, libc::EINVAL, "larder_open");
        refused(api.mkdir("/g", 0o40755), -1, libc::EINVAL, "larder_mkdir");
        assert_eq!(api.stat("/g").0, -1, "a refused open or mkdir made /g");
        assert_eq!(api.create_bucket("b"), 0);
        let (b, k) = (c("b"), c("k"));
        refused(
            larder_kv_put(api.raw(), b.as_ptr(), k.as_ptr(), buf.as_ptr().cast(), 1, 2),
            -1,
            libc::EINVAL,
            "larder_kv_put",
        );

        // Buffers: a count beyond the buffer, a buffer of another client.
        let buffer = larder_buffer_alloc(api.raw(), 16);
        assert!(!buffer.is_null(), "{}", last_error());
        refused(larder_pwrite_buffer(api.raw(), fd, buffer, 17, 0), -1, libc::EINVAL, "larder_pwrite_buffer");
        refused(larder_pread_buffer(api.raw(), fd, buffer, 17, 0), -1, libc::EINVAL, "larder_pread_buffer");
        refused(larder_pwrite_buffer(api.raw(), fd, null(), 1, 0), -1, libc::EINVAL, "larder_pwrite_buffer");
        refused(larder_pwrite_buffer(null(), fd, buffer, 1, 0), -1, libc::EINVAL, "larder_pwrite_buffer");
        let other = Api::connect(served.socket.to_str().unwrap());
        let theirs = other.open("/f", libc::O_RDWR, 0);
        assert!(theirs >= 0, "{}", last_error());
        refused(larder_pwrite_buffer(other.raw(), theirs, buffer, 16, 0), -1, libc::EINVAL, "larder_pwrite_buffer");
        // Too large for the data area: ENOMEM; above 4 GiB - 1: EINVAL.
        refused(larder_buffer_alloc(api.raw(), 1 << 31), null_mut(), libc::ENOMEM, "larder_buffer_alloc");
        refused(larder_buffer_alloc(api.raw(), 1 << 33), null_mut(), libc::EINVAL, "larder_buffer_alloc");
        assert_eq!(larder_buffer_free(buffer), 0);
        // Nothing reached the file.
        assert_eq!(api.fstat(fd).1.size, 0);
        drop(other);
    }
    drop(api);
    served.stop();
}

/// Sets up what another user may not change: a directory of mode 0555, a
/// file of mode 0, a bucket of mode 0555 (the owner's own bits refuse it
/// too, so a test that is not root can be that user).
fn lock_down(api: &Api, served: &Served) {
    assert_eq!(api.mkdir("/locked", 0o755), 0, "{}", last_error());
    let fd = api.open("/locked/victim", libc::O_WRONLY | libc::O_CREAT, 0o644);
    assert!(fd >= 0 && api.close(fd) == 0, "{}", last_error());
    let fd = api.open("/secret", libc::O_WRONLY | libc::O_CREAT, 0o000);
    assert!(fd >= 0 && api.close(fd) == 0, "{}", last_error());
    assert_eq!(api.create_bucket("shelf"), 0, "{}", last_error());
    assert_eq!(api.put("shelf", "k", b"v"), 0, "{}", last_error());
    let rust = client::Client::connect_socket(&served.socket).unwrap();
    rust.set_permissions("/locked", 0o555).unwrap();
    rust.set_permissions("/shelf", 0o555).unwrap();
}

/// What the user who is not the owner (nor root) gets: EACCES for each.
fn expect_eacces(socket: &str) {
    let api = Api::connect(socket);
    refused(api.mkdir("/locked/new", 0o755), -1, libc::EACCES, "larder_mkdir");
    refused(api.open("/locked/new", libc::O_WRONLY | libc::O_CREAT, 0o644), -1, libc::EACCES, "larder_open");
    refused(api.unlink("/locked/victim"), -1, libc::EACCES, "larder_unlink");
    refused(api.rename("/locked/victim", "/moved"), -1, libc::EACCES, "larder_rename");
    refused(api.open("/secret", libc::O_RDONLY, 0), -1, libc::EACCES, "larder_open");
    refused(api.open("/secret", libc::O_WRONLY, 0), -1, libc::EACCES, "larder_open");
    refused(api.put("shelf", "k2", b"v"), -1, libc::EACCES, "larder_kv_put");
    refused(api.delete("shelf", "k"), -1, libc::EACCES, "larder_kv_delete");
    // What the user may do still works: read the bucket, list the directory.
    let (got, length, value) = api.get("shelf", "k", 8);
    assert_eq!((got, length, &value[..1]), (0, 1, &b"v"[..]), "{}", last_error());
    assert_eq!(api.list("/locked").unwrap().len(), 1);
}

/// Run by `permissions_are_eacces` as another user (uid 65534) when the
/// tests run as root.
#[test]
#[ignore = "run by permissions_are_eacces as another user"]
fn eacces_as_another_user() {
    let socket = std::env::var("LARDER_CAPI_SOCKET").expect("LARDER_CAPI_SOCKET names the server's socket");
    expect_eacces(&socket);
}

#[test]
fn permissions_are_eacces() {
    let mut served = Served::start(true);
    let api = Api::connect(served.socket.to_str().unwrap());
    lock_down(&api, &served);
    if rustix::process::geteuid().is_root() {
        // Root passes every permission check: run the calls in this test
        // binary again as user 65534. Through /proc/self/exe, which the
        // child reaches without search permission on the directories above
        // the binary (a checkout under /root, say).
        let output = std::process::Command::new("/proc/self/exe")
            .args([
                "--exact",
                "tests::errno::eacces_as_another_user",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("LARDER_CAPI_SOCKET", &served.socket)
            .current_dir(served.dir.path())
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && text.contains("1 passed"),
            "as user 65534: {}\n{text}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    } else {
        expect_eacces(served.socket.to_str().unwrap());
    }
    // Nothing changed: the victim is still there, the new names are not.
    assert_eq!(api.list("/locked").unwrap().iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), ["victim"]);
    assert_eq!(api.stat("/moved").0, -1);
    assert_eq!(api.get("shelf", "k2", 0).0, -1);
    drop(api);
    served.stop();
}

#[test]
fn messages_are_per_thread() {
    let mut served = Served::start(true);
    let api = Api::connect(served.socket.to_str().unwrap());
    refused(api.stat("/here-missing").0, -1, libc::ENOENT, "larder_stat");
    let mine = last_error();
    assert!(mine.contains("here-missing"), "{mine}");
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(last_error(), "", "a new thread starts with no message");
            refused(api.rmdir("/there-missing"), -1, libc::ENOENT, "larder_rmdir");
        });
    });
    assert_eq!(last_error(), mine, "another thread's failure changed this thread's message");
    drop(api);
    served.stop();
}

/// Bytes that differ from position to position and from file to file.
fn pattern(length: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..length)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
#[allow(unsafe_code)]
fn one_client_serves_many_threads() {
    const THREADS: u64 = 8;
    const ROUNDS: u64 = 20;
    let mut served = Served::start(true);
    let api = Api::connect(served.socket.to_str().unwrap());
    assert_eq!(api.mkdir("/t", 0o755), 0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let api = &api;
            s.spawn(move || {
                for round in 0..ROUNDS {
                    let path = format!("/t/{t}-{round}");
                    let data = pattern(1000 + (t * 7919 + round * 104_729) as usize % 70_000, t * 1000 + round);
                    let fd = api.open(&path, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o644);
                    assert!(fd >= 0, "{path}: {}", last_error());
                    assert_eq!(api.pwrite(fd, &data, 0), data.len() as i64, "{}", last_error());
                    // The same bytes back through a zero-copy buffer of
                    // this thread, which shares the client's data area.
                    // SAFETY: a live client; the buffer is this thread's
                    // alone, read only between calls, and freed once.
                    unsafe {
                        let buffer = larder_buffer_alloc(api.raw(), data.len());
                        assert!(!buffer.is_null(), "{}", last_error());
                        let n = larder_pread_buffer(api.raw(), fd, buffer, data.len(), 0);
                        assert_eq!(n, data.len() as i64, "{}", last_error());
                        let bytes = std::slice::from_raw_parts(larder_buffer_data(buffer).cast::<u8>(), data.len());
                        assert!(bytes == &data[..], "{path}: other bytes came back");
                        assert_eq!(larder_buffer_free(buffer), 0);
                    }
                    // And copied (above 16 KiB, through a buffer the
                    // library takes from the shared data area).
                    let mut back = vec![0u8; data.len()];
                    assert_eq!(api.pread(fd, &mut back, 0), data.len() as i64, "{}", last_error());
                    assert!(back == data, "{path}: other bytes came back");
                    let (ok, st) = api.fstat(fd);
                    assert_eq!((ok, st.size), (0, data.len() as u64));
                    assert_eq!(api.close(fd), 0);
                    // A number this thread closed may be another thread's
                    // now; one never handed out is not open.
                    refused(api.fsync(1_000_000 + t as c_int), -1, libc::EBADF, "larder_fsync");
                }
            });
        }
    });
    let names = api.list("/t").unwrap();
    assert_eq!(names.len() as u64, THREADS * ROUNDS);
    for t in 0..THREADS {
        for round in 0..ROUNDS {
            let data = pattern(1000 + (t * 7919 + round * 104_729) as usize % 70_000, t * 1000 + round);
            let fd = api.open(&format!("/t/{t}-{round}"), libc::O_RDONLY, 0);
            let mut back = vec![0u8; data.len() + 10];
            assert_eq!(api.pread(fd, &mut back, 0), data.len() as i64);
            assert!(back[..data.len()] == data[..], "/t/{t}-{round} holds other bytes");
            assert_eq!(api.close(fd), 0);
        }
    }
    drop(api);
    served.stop();
}

#[test]
#[allow(unsafe_code)]
fn kv_values_through_buffers() {
    let mut served = Served::start(true);
    let api = Api::connect(served.socket.to_str().unwrap());
    assert_eq!(api.create_bucket("b"), 0);
    let (bucket, key, big_key, missing) = (c("b"), c("k"), c("big"), c("missing"));
    let value = pattern(100_000, 9);
    // SAFETY (all the calls below): a live client, NUL-terminated strings,
    // live buffers whose bytes are touched only between calls, a writable
    // length.
    unsafe {
        let buffer = larder_buffer_alloc(api.raw(), 200_000);
        assert!(!buffer.is_null(), "{}", last_error());
        let data = larder_buffer_data(buffer).cast::<u8>();
        std::ptr::copy_nonoverlapping(value.as_ptr(), data, value.len());
        // The first 100,000 bytes of the 200,000-byte buffer are the value.
        let put = larder_kv_put_buffer(api.raw(), bucket.as_ptr(), key.as_ptr(), buffer, value.len(), LARDER_DURABLE);
        assert_eq!(put, 0, "{}", last_error());
        let (got, length, bytes) = api.get("b", "k", value.len());
        assert_eq!((got, length), (0, value.len()));
        assert!(bytes == value, "the copied get returned other bytes");

        std::ptr::write_bytes(data, 0, 200_000);
        let mut length = 0usize;
        let got = larder_kv_get_buffer(api.raw(), bucket.as_ptr(), key.as_ptr(), buffer, &mut length);
        assert_eq!((got, length), (0, value.len()), "{}", last_error());
        assert!(std::slice::from_raw_parts(data, value.len()) == &value[..], "the zero-copy get returned other bytes");

        // A value longer than the buffer: its length, and nothing written.
        assert_eq!(api.put("b", "big", &pattern(300_000, 4)), 0, "{}", last_error());
        std::ptr::write_bytes(data, 0xee, 200_000);
        let got = larder_kv_get_buffer(api.raw(), bucket.as_ptr(), big_key.as_ptr(), buffer, &mut length);
        assert_eq!((got, length), (0, 300_000), "{}", last_error());
        assert!(
            std::slice::from_raw_parts(data, 200_000).iter().all(|&b| b == 0xee),
            "a value that did not fit was written"
        );

        refused(
            larder_kv_get_buffer(api.raw(), bucket.as_ptr(), missing.as_ptr(), buffer, &mut length),
            -1,
            libc::ENOENT,
            "larder_kv_get_buffer",
        );
        refused(
            larder_kv_put_buffer(api.raw(), bucket.as_ptr(), key.as_ptr(), buffer, 200_001, LARDER_DURABLE),
            -1,
            libc::EINVAL,
            "larder_kv_put_buffer",
        );
        refused(
            larder_kv_get_buffer(api.raw(), bucket.as_ptr(), key.as_ptr(), buffer, null_mut()),
            -1,
            libc::EINVAL,
            "larder_kv_get_buffer",
        );
        let other = Api::connect(served.socket.to_str().unwrap());
        refused(
            larder_kv_put_buffer(other.raw(), bucket.as_ptr(), key.as_ptr(), buffer, 10, LARDER_DURABLE),
            -1,
            libc::EINVAL,
            "larder_kv_put_buffer",
        );
        drop(other);
        // The refused put changed nothing.
        let (_, length, bytes) = api.get("b", "k", value.len());
        assert!(length == value.len() && bytes == value);
        assert_eq!(larder_buffer_free(buffer), 0);
    }
    drop(api);
    served.stop();
}

#[test]
#[allow(unsafe_code)]
fn large_reads_still_work_when_buffers_fill_the_data_area() {
    let mut served = Served::start(true);
    let api = Api::connect(served.socket.to_str().unwrap());
    let data = pattern(300_000, 17);
    let fd = api.open("/f", libc::O_RDWR | libc::O_CREAT, 0o644);
    assert_eq!(api.pwrite(fd, &data, 0), data.len() as i64, "{}", last_error());
    // SAFETY: a live client; the buffers are freed once, below.
    let buffers: Vec<_> = unsafe {
        std::iter::from_fn(|| Some(larder_buffer_alloc(api.raw(), 64 << 10)).filter(|b| !b.is_null()))
            .take(10_000)
            .collect()
    };
    assert_eq!(errno(), libc::ENOMEM, "the data area did not fill: {}", last_error());
    assert!(buffers.len() >= 16, "only {} buffers of 64 KiB fit", buffers.len());
    let mut back = vec![0u8; data.len()];
    assert_eq!(api.pread(fd, &mut back, 0), data.len() as i64, "{}", last_error());
    assert!(back == data, "the read without a buffer returned other bytes");
    for buffer in buffers {
        // SAFETY: a buffer from larder_buffer_alloc, freed once.
        assert_eq!(unsafe { larder_buffer_free(buffer) }, 0);
    }
    assert_eq!(api.close(fd), 0);
    drop(api);
    served.stop();
}

#[test]
fn calls_fail_with_enotconn_once_the_server_is_gone() {
    let mut served = Served::start(true);
    let api = Api::connect(served.socket.to_str().unwrap());
    let fd = api.open("/f", libc::O_RDWR | libc::O_CREAT, 0o644);
    assert_eq!(api.pwrite(fd, b"abc", 0), 3, "{}", last_error());
    served.kill();
    let started = std::time::Instant::now();
    refused(api.stat("/f").0, -1, libc::ENOTCONN, "larder_stat");
    refused(api.pwrite(fd, b"d", 3), -1, libc::ENOTCONN, "larder_pwrite");
    refused(api.mkdir("/d", 0o755), -1, libc::ENOTCONN, "larder_mkdir");
    // The bound is a second; a loaded machine gets some slack.
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
    // Closing and disconnecting still work (locally).
    assert_eq!(api.close(fd), 0);
    drop(api);
    // Connecting to the dead server's socket is refused.
    let socket = c(served.socket.to_str().unwrap());
    #[allow(unsafe_code)]
    // SAFETY: a NUL-terminated string.
    let client = unsafe { larder_connect(socket.as_ptr()) };
    refused(client, null_mut(), libc::ECONNREFUSED, "larder_connect");
}
