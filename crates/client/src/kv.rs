//! The KV API through a server: buckets of keys, as `larder_kv::Kv` has
//! them, with values inline in the message or, above
//! [`INLINE_VALUE_BYTES`], through the data area or a streamed writer.

use std::io;

use larder_protocol::message::{Durability, KeyHead, KvOperation, Payload, Request, Response, ScanEntry};

use crate::error::{ClientError, Result};
use crate::{unexpected, Client};

/// Values up to this size travel inline in the request; larger ones go
/// through the data area (one copy into shared memory, none through a
/// socket), or, above the area's free room, through a streamed writer.
pub const INLINE_VALUE_BYTES: usize = 16 << 10;

/// Keys one scan request asks for.
const SCAN_PAGE: u32 = 1024;

impl Client {
    /// Creates a bucket (EEXIST if it exists).
    pub fn create_bucket(&self, bucket: impl AsRef<[u8]>) -> Result<()> {
        self.done("create_bucket", Request::CreateBucket { bucket: bucket.as_ref().to_vec() })
    }

    /// Removes an empty bucket.
    pub fn delete_bucket(&self, bucket: impl AsRef<[u8]>) -> Result<()> {
        self.done("delete_bucket", Request::DeleteBucket { bucket: bucket.as_ref().to_vec() })
    }

    /// The buckets, in byte order.
    pub fn buckets(&self) -> Result<Vec<Vec<u8>>> {
        match self.connection.call(&Request::ListBuckets)? {
            Response::Names(names) => Ok(names),
            other => Err(unexpected("list_buckets", &other)),
        }
    }

    /// Stores `value` under `key`, replacing any value there; atomically.
    /// With [`Durability::Durable`] it returns once the value is on disk.
    pub fn put(
        &self,
        bucket: impl AsRef<[u8]>,
        key: impl AsRef<[u8]>,
        value: &[u8],
        durability: Durability,
    ) -> Result<()> {
        let (bucket, key) = (bucket.as_ref().to_vec(), key.as_ref().to_vec());
        if value.len() <= INLINE_VALUE_BYTES.min(self.connection.inline_request_bytes()) {
            let value = Payload::Inline(value.to_vec());
            return self.done("put", Request::KvPut { bucket, key, value, durability });
        }
        match self.alloc_buffer(value.len()) {
            Ok(mut buffer) => {
                buffer.as_mut_slice().copy_from_slice(value);
                self.done(
                    "put",
                    Request::KvPut { bucket, key, value: Payload::Buffer(buffer.checked_slice(self)?), durability },
                )
            }
            Err(ClientError::NoBufferRoom { .. }) => {
                let mut writer = self.writer(bucket, key, durability)?;
                io::Write::write_all(&mut writer, value).map_err(|e| ClientError::Invalid(e.to_string()))?;
                writer.finish()
            }
            Err(e) => Err(e),
        }
    }

    /// Stores the value `buffer` holds under `key`: the zero-copy put.
    pub fn put_buffer(
        &self,
        bucket: impl AsRef<[u8]>,
        key: impl AsRef<[u8]>,
        buffer: &crate::Buffer,
        durability: Durability,
    ) -> Result<()> {
        let request = Request::KvPut {
            bucket: bucket.as_ref().to_vec(),
            key: key.as_ref().to_vec(),
            value: Payload::Buffer(buffer.checked_slice(self)?),
            durability,
        };
        self.done("put", request)
    }

    /// Stores the first `length` bytes of `buffer` under `key`: the
    /// zero-copy put of part of a buffer (EINVAL past its end).
    pub fn put_buffer_prefix(
        &self,
        bucket: impl AsRef<[u8]>,
        key: impl AsRef<[u8]>,
        buffer: &crate::Buffer,
        length: usize,
        durability: Durability,
    ) -> Result<()> {
        let request = Request::KvPut {
            bucket: bucket.as_ref().to_vec(),
            key: key.as_ref().to_vec(),
            value: Payload::Buffer(buffer.checked_prefix(self, length)?),
            durability,
        };
        self.done("put", request)
    }

    /// The value under `key`, or none.
    pub fn get(&self, bucket: impl AsRef<[u8]>, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let (bucket, key) = (bucket.as_ref(), key.as_ref());
        let request = Request::KvGet { bucket: bucket.to_vec(), key: key.to_vec(), into: None };
        match self.connection.call(&request) {
            Ok(Response::Value(value)) => Ok(value),
            Ok(other) => Err(unexpected("get", &other)),
            // Too large for one message: read it in pieces.
            Err(e) if e.errno() == libc::EFBIG => {
                let Some(mut reader) = self.reader(bucket, key)? else { return Ok(None) };
                let mut value = Vec::with_capacity(usize::try_from(reader.size()).unwrap_or(0));
                io::Read::read_to_end(&mut reader, &mut value).map_err(|e| ClientError::Invalid(e.to_string()))?;
                Ok(Some(value))
            }
            Err(e) => Err(e),
        }
    }

    /// Reads the value under `key` into `buffer` (the zero-copy get).
    /// Returns the value's length, or none if there is no such key; a
    /// length above the buffer's means the value did not fit and was not
    /// written.
    pub fn get_buffer(
        &self,
        bucket: impl AsRef<[u8]>,
        key: impl AsRef<[u8]>,
        buffer: &mut crate::Buffer,
    ) -> Result<Option<u64>> {
        let request = Request::KvGet {
            bucket: bucket.as_ref().to_vec(),
            key: key.as_ref().to_vec(),
            into: Some(buffer.checked_slice(self)?),
        };
        match self.connection.call(&request) {
            Ok(Response::ValueInBuffer { length }) => Ok(Some(length)),
            Ok(Response::Value(None)) => Ok(None),
            Ok(other) => Err(unexpected("get", &other)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The object and size under `key`, or none.
    pub fn head(&self, bucket: impl AsRef<[u8]>, key: impl AsRef<[u8]>) -> Result<Option<KeyHead>> {
        match self.connection.call(&Request::KvHead { bucket: bucket.as_ref().to_vec(), key: key.as_ref().to_vec() })? {
            Response::Head(head) => Ok(head),
            other => Err(unexpected("head", &other)),
        }
    }

    /// Removes `key`; returns whether it was there.
    pub fn delete(&self, bucket: impl AsRef<[u8]>, key: impl AsRef<[u8]>, durability: Durability) -> Result<bool> {
        let request = Request::KvDelete { bucket: bucket.as_ref().to_vec(), key: key.as_ref().to_vec(), durability };
        match self.connection.call(&request)? {
            Response::Deleted(was) => Ok(was),
            other => Err(unexpected("delete", &other)),
        }
    }

    /// Applies puts and deletes atomically: all or none.
    pub fn write_batch(
        &self,
        bucket: impl AsRef<[u8]>,
        operations: Vec<KvOperation>,
        durability: Durability,
    ) -> Result<()> {
        self.done("write_batch", Request::KvWriteBatch { bucket: bucket.as_ref().to_vec(), operations, durability })
    }

    /// Keys of `bucket` from `start` (inclusive) to `end` (exclusive; none
    /// for the bucket's end), in byte order, fetched a page at a time.
    pub fn scan(&self, bucket: impl AsRef<[u8]>, start: &[u8], end: Option<&[u8]>) -> Scan {
        Scan {
            client: self.clone(),
            bucket: bucket.as_ref().to_vec(),
            next: Some(start.to_vec()),
            end: end.map(<[u8]>::to_vec),
            page: Vec::new().into_iter(),
        }
    }

    /// Keys of `bucket` that start with `prefix`.
    pub fn scan_prefix(&self, bucket: impl AsRef<[u8]>, prefix: &[u8]) -> Scan {
        let end = prefix_end(prefix);
        self.scan(bucket, prefix, end.as_deref())
    }

    /// A writer for a value of any size, stored under `key` atomically at
    /// [`KvWriter::finish`]; dropped unfinished, it stores nothing.
    pub fn writer(&self, bucket: impl AsRef<[u8]>, key: impl AsRef<[u8]>, durability: Durability) -> Result<KvWriter> {
        let request =
            Request::KvWriterOpen { bucket: bucket.as_ref().to_vec(), key: key.as_ref().to_vec(), durability };
        match self.connection.call(&request)? {
            Response::Handle(handle) => Ok(KvWriter { client: self.clone(), handle, written: 0, open: true }),
            other => Err(unexpected("writer", &other)),
        }
    }

    /// A reader of the value under `key`, or none.
    pub fn reader(&self, bucket: impl AsRef<[u8]>, key: impl AsRef<[u8]>) -> Result<Option<KvReader>> {
        let request = Request::KvReaderOpen { bucket: bucket.as_ref().to_vec(), key: key.as_ref().to_vec() };
        match self.connection.call(&request) {
            Ok(Response::Opened { handle, size }) => {
                Ok(Some(KvReader { client: self.clone(), handle, size, offset: 0, open: true }))
            }
            Ok(other) => Err(unexpected("reader", &other)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends a request whose answer is `Done`.
    pub(crate) fn done(&self, what: &'static str, request: Request) -> Result<()> {
        match self.connection.call(&request)? {
            Response::Done => Ok(()),
            other => Err(unexpected(what, &other)),
        }
    }

    /// Closes a server-side handle (errors are the server's; the handle is
    /// gone either way).
    pub(crate) fn release(&self, handle: u64) -> Result<()> {
        let result = self.done("release", Request::Release { handle });
        self.connection.forget_handle(handle);
        result
    }
}

/// The first key after every key that starts with `prefix`, or none if
/// there is none (a prefix of 0xff bytes).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Keys of a bucket in order, fetched from the server a page at a time.
pub struct Scan {
    client: Client,
    bucket: Vec<u8>,
    /// Where the next page starts; none once the server said no more.
    next: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
    page: std::vec::IntoIter<ScanEntry>,
}

impl Scan {
    fn fetch(&mut self) -> Result<()> {
        let Some(start) = self.next.take() else { return Ok(()) };
        let request =
            Request::KvScan { bucket: self.bucket.clone(), start, end: self.end.clone(), max_entries: SCAN_PAGE };
        match self.client.connection.call(&request)? {
            Response::ScanPage { entries, more } => {
                if more {
                    // The next page starts just after the last key.
                    self.next = entries.last().map(|e| {
                        let mut k = e.key.clone();
                        k.push(0);
                        k
                    });
                }
                self.page = entries.into_iter();
                Ok(())
            }
            other => Err(unexpected("scan", &other)),
        }
    }
}

impl Iterator for Scan {
    type Item = Result<ScanEntry>;

    fn next(&mut self) -> Option<Result<ScanEntry>> {
        loop {
            if let Some(entry) = self.page.next() {
                return Some(Ok(entry));
            }
            self.next.as_ref()?;
            if let Err(e) = self.fetch() {
                self.next = None;
                return Some(Err(e));
            }
        }
    }
}

/// A value being written in pieces (`io::Write`); stored at `finish`.
pub struct KvWriter {
    client: Client,
    handle: u64,
    written: u64,
    open: bool,
}

impl KvWriter {
    /// Stores what was written under the key, atomically, and closes the
    /// writer.
    pub fn finish(mut self) -> Result<()> {
        self.open = false;
        let result = self.client.done("writer_finish", Request::KvWriterFinish { handle: self.handle });
        self.client.connection.forget_handle(self.handle);
        result
    }
}

impl io::Write for KvWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(self.client.connection.inline_request_bytes());
        let request =
            Request::Write { handle: self.handle, offset: self.written, data: Payload::Inline(data[..n].to_vec()) };
        match self.client.connection.call(&request)? {
            Response::Length(written) => {
                let written = usize::try_from(written).unwrap_or(n).min(n);
                self.written += written as u64;
                Ok(written)
            }
            other => Err(unexpected("write", &other).into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for KvWriter {
    fn drop(&mut self) {
        if self.open {
            // Unfinished: the server drops what was written.
            let _ = self.client.release(self.handle);
        }
    }
}

/// A value being read in pieces (`io::Read`).
pub struct KvReader {
    client: Client,
    handle: u64,
    size: u64,
    offset: u64,
    open: bool,
}

impl KvReader {
    /// The value's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl io::Read for KvReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() || self.offset >= self.size {
            return Ok(0);
        }
        let length = out.len().min(self.client.connection.inline_response_bytes()) as u32;
        match self.client.connection.call(&Request::Read { handle: self.handle, offset: self.offset, length })? {
            Response::Data(bytes) => {
                let n = bytes.len().min(out.len());
                out[..n].copy_from_slice(&bytes[..n]);
                self.offset += n as u64;
                Ok(n)
            }
            other => Err(unexpected("read", &other).into()),
        }
    }
}

impl Drop for KvReader {
    fn drop(&mut self) {
        if self.open {
            self.open = false;
            let _ = self.client.release(self.handle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_ends_are_the_next_key_after_the_prefix() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }
}
