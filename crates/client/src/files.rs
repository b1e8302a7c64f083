//! Open files, shaped like `std::fs::File` and `std::fs::OpenOptions`.

use std::io;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use larder_protocol::message::{FileKind, Payload, Request, Response, SetAttributes};

use crate::buffers::Buffer;
use crate::error::{ClientError, Result};
use crate::kv::INLINE_VALUE_BYTES;
use crate::paths::{path_bytes, Metadata};
use crate::walk::Walked;
use crate::{unexpected, Client};

/// How to open a file, as `std::fs::OpenOptions`.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    mode: u32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// Nothing set (mode 0o644 for a created file).
    pub fn new() -> OpenOptions {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            mode: 0o644,
        }
    }

    /// Open for reading.
    pub fn read(&mut self, on: bool) -> &mut Self {
        self.read = on;
        self
    }

    /// Open for writing.
    pub fn write(&mut self, on: bool) -> &mut Self {
        self.write = on;
        self
    }

    /// Every write goes to the end (O_APPEND); implies writing.
    pub fn append(&mut self, on: bool) -> &mut Self {
        self.append = on;
        self
    }

    /// Cut the file to 0 bytes at open (O_TRUNC).
    pub fn truncate(&mut self, on: bool) -> &mut Self {
        self.truncate = on;
        self
    }

    /// Create the file if it does not exist (O_CREAT).
    pub fn create(&mut self, on: bool) -> &mut Self {
        self.create = on;
        self
    }

    /// Create the file; fail with EEXIST if it exists (O_CREAT | O_EXCL).
    pub fn create_new(&mut self, on: bool) -> &mut Self {
        self.create_new = on;
        self
    }

    /// Permission bits of a created file (before the server applies
    /// nothing like a umask: the bits are used as given).
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }

    /// The `open(2)` flags these options stand for.
    fn flags(&self) -> i32 {
        let writes = self.write || self.append;
        let mut flags = match (self.read, writes) {
            (true, true) => libc::O_RDWR,
            (false, true) => libc::O_WRONLY,
            _ => libc::O_RDONLY,
        };
        if self.append {
            flags |= libc::O_APPEND;
        }
        if self.truncate {
            flags |= libc::O_TRUNC;
        }
        if self.create || self.create_new {
            flags |= libc::O_CREAT;
        }
        if self.create_new {
            flags |= libc::O_EXCL;
        }
        flags
    }

    /// Opens `path` through `client` with these options.
    pub fn open(&self, client: &Client, path: impl AsRef<Path>) -> Result<File> {
        client.open_with(path.as_ref(), self)
    }
}

impl Client {
    /// Opens an existing file for reading.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<File> {
        self.open_with(path.as_ref(), OpenOptions::new().read(true))
    }

    /// Creates (or truncates) a file and opens it for writing.
    pub fn create(&self, path: impl AsRef<Path>) -> Result<File> {
        self.open_with(path.as_ref(), OpenOptions::new().write(true).create(true).truncate(true))
    }

    fn open_with(&self, path: &Path, options: &OpenOptions) -> Result<File> {
        Ok(self.open_reading(path, options, false)?.0)
    }

    /// Opens `path`; with `want_bytes`, also returns the file's first
    /// bytes when they came with the open's answer, and whether they are
    /// the whole file (as of the open).
    fn open_reading(&self, path: &Path, options: &OpenOptions, want_bytes: bool) -> Result<(File, Option<FirstBytes>)> {
        if options.truncate && !(options.write || options.append) {
            return Err(ClientError::Invalid("truncate needs write access".into()));
        }
        let flags = options.flags();
        let class = crate::cache::open_class(flags);
        if !(options.create || options.create_new || options.truncate) {
            return self.open_existing(path, flags, class, options.append, want_bytes);
        }
        let cache = self.connection.cache();
        // The directory the walk reaches (under its lease), whose lookup of
        // the new name a create caches: a later open of the file walks to
        // it without asking the server.
        let walked = match self.walk_to_last(path)? {
            Walked::Last { dir, name, .. } => Some((dir, name)),
            Walked::Found(_) | Walked::No => None,
        };
        let resolved = self.resolve(path, true)?;
        let (handle, ino, class) = match resolved.attributes {
            Some(_) if options.create_new => {
                return Err(ClientError::Server { errno: libc::EEXIST, message: format!("{} exists", path.display()) })
            }
            Some(attributes) => (self.open_ino(attributes.ino, flags)?, attributes.ino, class),
            None if options.create || options.create_new => {
                let lease = cache.wants_lease(&self.connection);
                let named = walked.filter(|(dir, name)| *dir == resolved.parent && *name == resolved.name);
                let request =
                    Request::Create { parent: resolved.parent, name: resolved.name, mode: options.mode, flags, lease };
                let stamp = cache.stamp();
                let sent = Instant::now();
                match self.connection.call(&request)? {
                    Response::Created { attributes, handle, lease: grant } => {
                        if let Some(grant) = grant {
                            let named = named.as_ref().map(|(dir, name)| (*dir, name.as_slice()));
                            cache.created(&self.connection, grant, sent, stamp, &attributes, named);
                        }
                        // The server checks no permission bits on the open a
                        // create makes: its handle may serve a later open only
                        // if they grant that open's access (as the creator
                        // owns the file, its owner's bits).
                        let class = class.filter(|c| crate::cache::owner_may(attributes.mode, *c));
                        (handle, attributes.ino, class)
                    }
                    other => return Err(unexpected("create", &other)),
                }
            }
            None => {
                return Err(ClientError::Server {
                    errno: libc::ENOENT,
                    message: format!("{}: no such file or directory", path.display()),
                })
            }
        };
        cache.opened(handle, ino, options.append);
        Ok((self.file(handle, ino, flags, class, options.append), None))
    }

    /// A `File` for `handle` on `ino`, opened with `flags`; `class` is the
    /// access class under which the cache may keep the handle after close
    /// (the handle's own, which may be wider than `flags` ask).
    fn file(&self, handle: u64, ino: u64, flags: i32, class: Option<i32>, append: bool) -> File {
        let readable = flags & libc::O_ACCMODE != libc::O_WRONLY;
        // Every read-only file refuses writes itself, not only one whose
        // handle is a kept read-write one: a posted write is kept in the
        // cached pages when it is sent, and the server's refusal is read
        // only later, so a read meanwhile would return bytes never written.
        let refuses_writes = flags & libc::O_ACCMODE == libc::O_RDONLY;
        let write_errors_seen = AtomicU64::new(self.connection.write_errors_seen(ino));
        File {
            client: self.clone(),
            handle,
            ino,
            position: 0,
            append,
            class,
            readable,
            refuses_writes,
            open: true,
            write_errors_seen,
        }
    }

    /// An open of an existing file (no create, no truncate): through the
    /// lease cache when it holds the path (a kept open of the file under
    /// its lease, or one `Open`), else by path in one request.
    fn open_existing(
        &self,
        path: &Path,
        flags: i32,
        class: Option<i32>,
        append: bool,
        want_bytes: bool,
    ) -> Result<(File, Option<FirstBytes>)> {
        let cache = self.connection.cache();
        // The common case of a file opened before: its kept open, under
        // leases that hold, in one look at the cache.
        if let Some(class) = class.filter(|_| cache.enabled()) {
            if let Some((bytes, count)) = crate::walk::plain_path(path) {
                let parts = crate::walk::components(bytes);
                if let Some((ino, handle, kept)) = cache.open_held(&self.connection, parts, count, class) {
                    return Ok((self.file(handle, ino, flags, Some(kept), append), None));
                }
            }
        }
        let last = match self.walk_to_last(path)? {
            // From the cache: a file whose lease holds, or one with a kept
            // open whose lease ran out (the renewal, one small round trip,
            // keeps the open and the pages when the server held the lease
            // unrevoked). Otherwise a kept open could not be used and a
            // fresh one would take a lease and an open: one `OpenPath`
            // does both.
            Walked::Found(found)
                if found.kind == FileKind::File
                    && (cache.holds(&self.connection, found.ino)
                        || class.is_some_and(|class| cache.keeps_open(found.ino, class))) =>
            {
                if let Some(class) = class {
                    let (handle, kept) = match cache.take_handle(&self.connection, found.ino, class) {
                        Some(kept) => kept,
                        None => (self.open_ino(found.ino, class)?, class),
                    };
                    cache.opened(handle, found.ino, kept & libc::O_APPEND != 0);
                    return Ok((self.file(handle, found.ino, flags, Some(kept), append), None));
                }
                None
            }
            Walked::Last { dir, version, name } => Some((dir, version, name)),
            Walked::Found(_) | Walked::No => None,
        };
        self.open_by_path(path, flags, class, append, want_bytes, last)
    }

    /// Opens `path` by one `OpenPath`: with a lease on the file when the
    /// cache takes one, and its first bytes when the caller or the cache
    /// wants them. `last` is the walk's directory, version and last name,
    /// whose lookup the answer caches.
    fn open_by_path(
        &self,
        path: &Path,
        flags: i32,
        class: Option<i32>,
        append: bool,
        want_bytes: bool,
        last: Option<(u64, u64, Vec<u8>)>,
    ) -> Result<(File, Option<FirstBytes>)> {
        let cache = self.connection.cache();
        let lease = class.is_some() && cache.wants_lease(&self.connection);
        let readable = flags & libc::O_ACCMODE != libc::O_WRONLY;
        let inline = self.connection.inline_response_bytes();
        let full = larder_protocol::lease::FULL_READ_BYTES as usize;
        let page = crate::cache::PAGE;
        // Whole pages for the cache (none when a page does not fit an
        // answer); for the caller alone, what an answer carries.
        let pages = inline.min(full) / page * page;
        let asked = match (readable, want_bytes, lease) {
            (false, _, _) => 0,
            (true, true, _) if pages == 0 => inline,
            (true, true, _) | (true, false, true) => pages,
            (true, false, false) => 0,
        };
        let request = Request::OpenPath { path: path_bytes(path), flags, read: asked as u32, lease };
        let call = || {
            let stamp = cache.stamp();
            let sent = Instant::now();
            self.connection.call(&request).map(|answer| (answer, stamp, sent))
        };
        let (answer, stamp, sent) = match call() {
            Err(e) if e.errno() == libc::EMFILE => {
                for handle in cache.take_kept_handles() {
                    self.release(handle)?;
                }
                call()?
            }
            answer => answer?,
        };
        let Response::PathOpened { parent, name, attributes, handle, data, lease: grant } = answer else {
            return Err(unexpected("open", &answer));
        };
        if let Some((dir, version, walked)) = last {
            // The name the server opened, unless a symbolic link led
            // elsewhere.
            if dir == parent && walked == name {
                let found = crate::cache::CachedPath { ino: attributes.ino, kind: attributes.kind };
                cache.insert_lookup(&self.connection, dir, version, &name, found);
            }
        }
        // A shorter answer than asked ends the file, unless the server's
        // limits cut it (then the file is longer than the bytes).
        let whole = data.as_ref().map(|d| d.len() < asked && d.len() as u64 >= attributes.size);
        if let Some(grant) = grant {
            let pages = data.as_deref().filter(|d| d.len() == asked || whole == Some(true));
            cache.opened_by_path(&self.connection, grant, sent, stamp, &attributes, pages, asked);
        }
        cache.opened(handle, attributes.ino, append);
        let file = self.file(handle, attributes.ino, flags, class, append);
        let first = match (want_bytes, data) {
            (true, Some(bytes)) => Some(FirstBytes { whole: whole == Some(true), bytes }),
            _ => None,
        };
        Ok((file, first))
    }

    /// Opens `ino` with `flags`; when the session's handles run out, the
    /// opens kept by the cache are released and the open tried again.
    fn open_ino(&self, ino: u64, flags: i32) -> Result<u64> {
        let open = || match self.connection.call(&Request::Open { ino, flags })? {
            Response::Handle(handle) => Ok(handle),
            other => Err(unexpected("open", &other)),
        };
        match open() {
            Err(e) if e.errno() == libc::EMFILE => {
                for handle in self.connection.cache().take_kept_handles() {
                    self.release(handle)?;
                }
                open()
            }
            answer => answer,
        }
    }

    /// A whole file's bytes. A file the cache does not hold is opened by
    /// path with its first bytes in one round trip; when they are the
    /// whole file, that is all (the close is posted).
    pub fn read(&self, path: impl AsRef<Path>) -> Result<Vec<u8>> {
        let (file, first) = self.open_reading(path.as_ref(), OpenOptions::new().read(true), true)?;
        let mut out = match first {
            Some(FirstBytes { whole: true, bytes }) => return Ok(bytes),
            Some(FirstBytes { bytes, .. }) => bytes,
            None => Vec::new(),
        };
        let chunk = self.connection.inline_response_bytes().max(crate::cache::PAGE);
        loop {
            let at = out.len();
            out.resize(at + chunk, 0);
            let n = file.read_at(&mut out[at..], at as u64)?;
            out.truncate(at + n);
            if n == 0 {
                return Ok(out);
            }
        }
    }

    /// Writes `data` as a file's whole content, creating it if needed.
    pub fn write(&self, path: impl AsRef<Path>, data: &[u8]) -> Result<()> {
        let file = self.create(path)?;
        let mut offset = 0;
        while offset < data.len() {
            offset += file.write_at(&data[offset..], offset as u64)?;
        }
        // Waits for the close, so its error is the caller's and the server
        // has let the handle go when this returns.
        file.close()
    }
}

/// A file's first bytes, as they came with its open.
struct FirstBytes {
    /// Whether they are the whole file.
    whole: bool,
    bytes: Vec<u8>,
}

/// An open file on the server. Reads and writes through `io::Read`,
/// `io::Write` and `io::Seek` move a position kept in the client; closed
/// when dropped.
pub struct File {
    client: Client,
    handle: u64,
    ino: u64,
    position: u64,
    append: bool,
    /// The access class of its open, if the cache may keep it after close.
    class: Option<i32>,
    /// Whether it is open for reading.
    readable: bool,
    /// Whether writes are refused here rather than by the server: it is
    /// open read-only (its handle may be a kept read-write one, which the
    /// server would let write; and a posted write, kept in the cached pages
    /// as it is sent, must not be read back before its refusal comes).
    refuses_writes: bool,
    /// Whether it still holds its handle (`close` gave it up).
    open: bool,
    /// How many failures of writes posted to its file (through any open)
    /// it has returned or was opened after (Linux's errseq).
    write_errors_seen: AtomicU64,
}

impl File {
    /// Its inode number.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// Reads up to `out.len()` bytes at `offset`; 0 at the end. On an
    /// error `out`'s contents are unspecified (a served answer whose
    /// checksum fails is refused after its bytes were copied in).
    pub fn read_at(&self, out: &mut [u8], offset: u64) -> Result<usize> {
        let cache = self.client.connection.cache();
        // A handle not open for reading gets the server's EBADF.
        if self.readable {
            // Bytes posted to the file and refused are never served.
            self.client.connection.settle_posted_to(self.ino)?;
            if let Some(n) = cache.read(&self.client.connection, self.ino, offset, out) {
                return Ok(n);
            }
            // Pages are cached only when a whole one fits an answer (rings
            // of a few KiB carry less).
            let pages_fit = self.client.connection.inline_response_bytes() >= crate::cache::PAGE;
            // Whole pages around the range only where a file can have bytes
            // (their end past u64::MAX would overflow); beyond, the server
            // answers as for any read.
            let in_range = offset.checked_add(out.len() as u64).is_some_and(|end| end <= i64::MAX as u64);
            if let Some(version) =
                cache.file_version(&self.client.connection, self.ino).filter(|_| pages_fit && in_range)
            {
                return self.read_pages(out, offset, version);
            }
        }
        let length = out.len().min(self.client.connection.inline_response_bytes());
        let request = Request::Read { handle: self.handle, offset, length: length as u32 };
        self.client.connection.call_read(&request, &mut out[..length])
    }

    /// A read of the whole pages around `offset..offset + out.len()`,
    /// cached under the file's lease as of `version`.
    fn read_pages(&self, out: &mut [u8], offset: u64, version: u64) -> Result<usize> {
        let page = crate::cache::PAGE as u64;
        let start = offset / page * page;
        let end = (offset + out.len() as u64).next_multiple_of(page);
        // A leasing server answers up to FULL_READ_BYTES in full unless the
        // file ends, so a shorter answer marks the end.
        let full = u64::from(larder_protocol::lease::FULL_READ_BYTES);
        // At least one page: `read_at` caches only when one fits.
        let limit = ((self.client.connection.inline_response_bytes() as u64).min(full) / page * page).max(page);
        let length = (end - start).min(limit) as u32;
        let bytes = match self.client.connection.call(&Request::Read { handle: self.handle, offset: start, length })? {
            Response::Data(bytes) => bytes,
            other => return Err(unexpected("read", &other)),
        };
        let cache = self.client.connection.cache();
        cache.insert_pages(&self.client.connection, self.ino, version, start, length as usize, &bytes);
        let skip = ((offset - start) as usize).min(bytes.len());
        let n = (bytes.len() - skip).min(out.len());
        out[..n].copy_from_slice(&bytes[skip..skip + n]);
        Ok(n)
    }

    /// Writes `data` at `offset` (at the end, for a file opened to
    /// append); returns the bytes written.
    pub fn write_at(&self, data: &[u8], offset: u64) -> Result<usize> {
        if data.len() > INLINE_VALUE_BYTES {
            if let Ok(mut buffer) = self.client.alloc_buffer(data.len()) {
                buffer.as_mut_slice().copy_from_slice(data);
                return self.write_buffer(&buffer, offset);
            }
        }
        let n = data.len().min(self.client.connection.inline_request_bytes());
        let request = Request::Write { handle: self.handle, offset, data: Payload::Inline(data[..n].to_vec()) };
        self.written(request)
    }

    /// Writes `data` at `offset` (at the end for a file opened to append)
    /// without waiting for the server's answer, as a buffered write(2)
    /// returns before the bytes reach the disk: the bytes are copied into
    /// the request at once, the write takes effect before the answer of
    /// this client's next call (any call: a later read, stat or listing
    /// of this client sees it), and other clients see it once the server
    /// executed it. If it fails, the next [`File::write_at`],
    /// [`File::sync_all`] or [`File::close`] of this file, and of every
    /// other `File` of this client open on the same file when it failed,
    /// returns that failure, once each (the first not yet returned, if
    /// several failed; each waits for the answers of the writes posted
    /// before it), as Linux returns a failed writeback at the next fsync
    /// of each descriptor (errseq); so does the next `write_posted` once
    /// the failure's answer was read (it does not wait for answers). A
    /// read of the file while its posted writes are unanswered waits for
    /// their answers, so a refused write's bytes are never read back.
    /// Data longer than one request carries inline
    /// ([`Client::max_inline_bytes`]) is written by waiting writes
    /// instead. Returning an earlier posted write's failure, it writes
    /// nothing.
    pub fn write_posted(&self, data: &[u8], offset: u64) -> Result<()> {
        let connection = &self.client.connection;
        // Only a failure already seen: waiting for the answers would make
        // every post a round trip.
        connection.take_known_post_failure(self.handle, self.ino, &self.write_errors_seen)?;
        if let Err(refused) = self.check_writable() {
            // As the server's refusal of a posted write comes back: at the
            // file's next flush point.
            connection.refuse_posted(self.handle, refused);
            return Ok(());
        }
        if data.len() <= connection.inline_request_bytes() {
            return connection.post_write(self.handle, self.ino, offset, data);
        }
        let mut done = 0;
        while done < data.len() {
            // O_APPEND writes land at the end whatever the offset says.
            let n = self.write_at(&data[done..], offset + done as u64)?;
            if n == 0 {
                return Err(ClientError::Server { errno: libc::EIO, message: "a write wrote nothing".into() });
            }
            done += n;
        }
        Ok(())
    }

    /// Writes the bytes of `buffer` at `offset`: the zero-copy write.
    pub fn write_buffer(&self, buffer: &Buffer, offset: u64) -> Result<usize> {
        self.written(Request::Write {
            handle: self.handle,
            offset,
            data: Payload::Buffer(buffer.checked_slice(&self.client)?),
        })
    }

    /// Reads into `buffer` from `offset`: the zero-copy read. Returns the
    /// bytes read (fewer at the end of the file).
    pub fn read_buffer(&self, buffer: &mut Buffer, offset: u64) -> Result<usize> {
        let request = Request::ReadBuffer { handle: self.handle, offset, into: buffer.checked_slice(&self.client)? };
        match self.client.connection.call(&request)? {
            Response::Length(n) => Ok(n as usize),
            other => Err(unexpected("read_buffer", &other)),
        }
    }

    /// Writes the first `length` bytes of `buffer` at `offset`: the
    /// zero-copy write of part of a buffer (EINVAL past its end).
    pub fn write_buffer_prefix(&self, buffer: &Buffer, length: usize, offset: u64) -> Result<usize> {
        let data = Payload::Buffer(buffer.checked_prefix(&self.client, length)?);
        self.written(Request::Write { handle: self.handle, offset, data })
    }

    /// Reads at most `length` bytes from `offset` into the start of
    /// `buffer` (EINVAL past its end). Returns the bytes read.
    pub fn read_buffer_prefix(&self, buffer: &mut Buffer, length: usize, offset: u64) -> Result<usize> {
        let request =
            Request::ReadBuffer { handle: self.handle, offset, into: buffer.checked_prefix(&self.client, length)? };
        match self.client.connection.call(&request)? {
            Response::Length(n) => Ok(n as usize),
            other => Err(unexpected("read_buffer", &other)),
        }
    }

    /// EBADF, as the server answers a write through a read-only handle,
    /// for a file opened read-only.
    fn check_writable(&self) -> Result<()> {
        if !self.refuses_writes {
            return Ok(());
        }
        Err(ClientError::Server {
            errno: libc::EBADF,
            message: format!("handle {} is not open for writing", self.handle),
        })
    }

    fn written(&self, request: Request) -> Result<usize> {
        self.client.connection.take_post_failure(self.handle, self.ino, &self.write_errors_seen)?;
        self.check_writable()?;
        match self.client.connection.call(&request)? {
            Response::Length(n) => Ok(n as usize),
            other => Err(unexpected("write", &other)),
        }
    }

    /// Closes the file and waits for the server's answer, returning its
    /// error if any. Dropping a `File` closes it too, without waiting:
    /// that release takes effect before the answer of this client's next
    /// call, and its error is lost (as a close's in `std::fs::File`).
    /// An open the lease cache keeps for reuse is kept either way.
    pub fn close(mut self) -> Result<()> {
        self.open = false;
        // A posted write's failure is this close's error; the handle goes
        // (or is kept) all the same.
        let posted = self.client.connection.take_post_failure(self.handle, self.ino, &self.write_errors_seen);
        if let Some(class) = self.class {
            if self.client.connection.cache().keep_handle(&self.client.connection, self.ino, class, self.handle) {
                return posted;
            }
        }
        let released = self.client.release(self.handle);
        posted.and(released)
    }

    /// Makes the file's changes, and every earlier change, durable; first
    /// returns a posted write's failure, if one failed.
    pub fn sync_all(&self) -> Result<()> {
        self.client.connection.take_post_failure(self.handle, self.ino, &self.write_errors_seen)?;
        self.client.done("fsync", Request::Fsync { handle: self.handle })
    }

    /// The file's metadata.
    pub fn metadata(&self) -> Result<Metadata> {
        self.client.metadata_of(self.ino)
    }

    /// Cuts or extends the file to `size` bytes.
    pub fn set_len(&self, size: u64) -> Result<()> {
        let set = SetAttributes { size: Some(size), ..SetAttributes::default() };
        self.client.attributes("setattr", Request::SetAttributes { ino: self.ino, set, handle: Some(self.handle) })?;
        Ok(())
    }
}

impl io::Read for File {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.read_at(out, self.position)?;
        self.position += n as u64;
        Ok(n)
    }
}

impl io::Write for File {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.write_at(data, self.position)?;
        if self.append {
            self.position = self.metadata()?.len();
        } else {
            self.position += n as u64;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl io::Seek for File {
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        let base = match to {
            io::SeekFrom::Start(n) => {
                self.position = n;
                return Ok(n);
            }
            io::SeekFrom::Current(_) => self.position,
            io::SeekFrom::End(_) => self.metadata()?.len(),
        };
        let delta = match to {
            io::SeekFrom::Current(d) | io::SeekFrom::End(d) => d,
            io::SeekFrom::Start(_) => 0,
        };
        match base.checked_add_signed(delta) {
            Some(p) => {
                self.position = p;
                Ok(p)
            }
            None => Err(io::Error::new(io::ErrorKind::InvalidInput, "seek to a negative or overflowing offset")),
        }
    }
}

impl Client {
    /// The metadata of object `ino`: from the lease cache for a regular
    /// file under its lease, else asked for (and cached).
    pub(crate) fn metadata_of(&self, ino: u64) -> Result<Metadata> {
        let cache = self.connection.cache();
        // A size or time a refused posted write set is never served.
        self.connection.settle_posted_to(ino)?;
        if let Some(attributes) = cache.attributes(&self.connection, ino) {
            return Ok(Metadata { attributes });
        }
        let version = cache.file_version(&self.connection, ino);
        let attributes = self.attributes("getattr", Request::GetAttributes { ino })?;
        if let Some(version) = version {
            cache.insert_attributes(&self.connection, version, &attributes);
        }
        Ok(Metadata { attributes })
    }
}

impl Drop for File {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        if let Some(class) = self.class {
            if self.client.connection.cache().keep_handle(&self.client.connection, self.ino, class, self.handle) {
                return;
            }
        }
        // A close's answer changes nothing the caller could act on: the
        // release is posted, not waited for (`Connection::post_release`).
        let _ = self.client.connection.post_release(self.handle);
    }
}
