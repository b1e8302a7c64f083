//! Streaming large values: a writer that fills a new, unnamed object in
//! chunks and names it when finished, and a reader by offset.
//!
//! The writer's object carries an orphan record until `finish` links it
//! (one transaction that also unlinks any old value), so a crash or a
//! dropped writer leaves nothing behind: the next open frees orphans.

use std::io;
use std::ops::Deref;
use std::sync::Arc;

use larder_namespace::NamespaceTxn;
use larder_object::meta::{orphan_key, Kind, Orphan, OrphanReason, Timestamp};
use larder_object::{Durability, LockRequest};

use crate::bucket::Bucket;
use crate::error::{KvError, Result};
use crate::key::Key;
use crate::ops::{walk_owned, Removed, OBJECT_MODE};
use crate::plan::{leaf_is_a_level, with_plans, Plan, PlanKind, TxnError};
use crate::Kv;

/// Bytes a writer gathers before writing them to its object.
pub const WRITER_CHUNK_BYTES: usize = 8 << 20;

/// The KV store a writer works in: borrowed ([`Kv::writer`]), or shared
/// ([`Kv::shared_writer`]) by a writer that must outlive any borrow.
enum KvRef<'a> {
    Borrowed(&'a Kv),
    Shared(Arc<Kv>),
}

impl Deref for KvRef<'_> {
    type Target = Kv;

    fn deref(&self) -> &Kv {
        match self {
            KvRef::Borrowed(kv) => kv,
            KvRef::Shared(kv) => kv,
        }
    }
}

/// Writes a value in pieces (`std::io::Write`); [`KvWriter::finish`]
/// stores it under its key atomically. Dropped unfinished, it stores
/// nothing.
pub struct KvWriter<'a> {
    kv: KvRef<'a>,
    bucket: Bucket,
    key: Key,
    durability: Durability,
    object: u64,
    written: u64,
    buf: Vec<u8>,
    finished: bool,
}

impl Kv {
    /// A writer of a new value for `key` in `bucket`.
    pub fn writer(
        &self,
        bucket: impl AsRef<[u8]>,
        key: impl AsRef<[u8]>,
        durability: Durability,
    ) -> Result<KvWriter<'_>> {
        self.start_writer(KvRef::Borrowed(self), bucket.as_ref(), key.as_ref(), durability)
    }

    /// [`Kv::writer`] holding a share of the store instead of a borrow, so
    /// that the writer can be kept across calls (a server session keeps
    /// one between a client's requests).
    pub fn shared_writer(
        self: &Arc<Self>,
        bucket: impl AsRef<[u8]>,
        key: impl AsRef<[u8]>,
        durability: Durability,
    ) -> Result<KvWriter<'static>> {
        self.start_writer(KvRef::Shared(Arc::clone(self)), bucket.as_ref(), key.as_ref(), durability)
    }

    fn start_writer<'a>(
        &self,
        kv: KvRef<'a>,
        bucket: &[u8],
        key: &[u8],
        durability: Durability,
    ) -> Result<KvWriter<'a>> {
        let bucket = self.bucket(bucket)?;
        let key = Key::parse(key)?;
        // A key inside a heap is refused before any byte is written
        // (finish's plan would refuse it too).
        Plan::make(self.store(), &bucket, &key)?;
        // Only its name: the data goes to containers, which stop at the
        // reserve themselves.
        self.store().check_room(0)?;
        let (uid, gid) = self.owner;
        let (object, _) = self.store().transact(&[], Durability::Buffered, |txn| {
            let id = txn.create_object(Kind::File, OBJECT_MODE, uid, gid)?;
            let record = Orphan { reason: OrphanReason::Anonymous, since: Timestamp::now() }.encode()?;
            txn.put(&orphan_key(id), &record);
            Ok(id)
        })?;
        Ok(KvWriter {
            kv,
            bucket,
            key,
            durability,
            object,
            written: 0,
            buf: Vec::with_capacity(WRITER_CHUNK_BYTES),
            finished: false,
        })
    }

    /// A reader of the value under `key` in `bucket`, or `None`.
    pub fn reader(&self, bucket: impl AsRef<[u8]>, key: impl AsRef<[u8]>) -> Result<Option<KvReader<'_>>> {
        Ok(self.head(bucket, key)?.map(|h| KvReader { kv: self, object: h.object, offset: 0, size: h.size }))
    }
}

impl KvWriter<'_> {
    /// The new value's object (unnamed until [`KvWriter::finish`]).
    pub fn object(&self) -> u64 {
        self.object
    }

    /// Bytes written to the value so far.
    pub fn position(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    fn write_chunk(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        // Buffered: only `finish` makes anything visible, and it is durable
        // with `finish`'s commit, which follows these in the log.
        self.kv.store().write(self.object, self.written, &self.buf, Durability::Buffered)?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Writes what is left and stores the value under the key, replacing
    /// any value there, with the writer's durability.
    pub fn finish(mut self) -> Result<()> {
        self.write_chunk()?;
        let (object, owner) = (self.object, self.kv.owner);
        let mine = [LockRequest::Exclusive(object)];
        let (store, open, bucket) = (self.kv.store(), self.kv.open_objects(), &self.bucket);
        let removed = with_plans(
            store,
            open,
            bucket,
            &[&self.key],
            self.durability,
            &[PlanKind::Replace],
            &mine,
            |txn, plans| {
                let key = &self.key;
                let dir = walk_owned(txn, &plans[0], key, owner.0, owner.1)?;
                let old = match txn.lookup(dir, key.leaf())? {
                    Some(d) if d.kind == Kind::Directory => return Err(leaf_is_a_level(key).into()),
                    Some(d) => {
                        let open = plans[0].unlinks_open(d.child);
                        let u = txn.unlink(dir, key.leaf(), d.child, open)?;
                        Some(Removed { object: d.child, orphaned: u.orphaned, open })
                    }
                    None => None,
                };
                txn.link_in(dir, key.leaf(), object).map_err(TxnError::from)?;
                Ok(old)
            },
        );
        // Refused (a key conflict, a level in the way): the value is
        // still an orphan nobody names, and drop frees it.
        let removed = removed?;
        self.finished = true;
        if let Some(old) = removed {
            self.kv.after_delete(old)?;
        }
        Ok(())
    }
}

impl io::Write for KvWriter<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = WRITER_CHUNK_BYTES - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == WRITER_CHUNK_BYTES {
            self.write_chunk().map_err(io::Error::other)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for KvWriter<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Unfinished: the object is an orphan nobody will name.
            if let Err(e) = self.kv.store().free_orphan(self.object, Durability::Buffered) {
                tracing::warn!(object = self.object, error = %e, "could not free an unfinished value; the next open will");
            }
        }
    }
}

/// Reads a value in pieces (`std::io::Read` and `Seek`). Each read sees
/// the value as of that read; a value deleted meanwhile fails the read.
pub struct KvReader<'a> {
    kv: &'a Kv,
    object: u64,
    offset: u64,
    size: u64,
}

impl KvReader<'_> {
    /// The value's size when the reader was made.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl io::Read for KvReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.kv.store().read(self.object, self.offset, buf).map_err(|e| io::Error::other(KvError::from(e)))?;
        self.offset += n as u64;
        Ok(n)
    }
}

impl io::Seek for KvReader<'_> {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        let to = match pos {
            io::SeekFrom::Start(o) => Some(o),
            io::SeekFrom::End(d) => self.size.checked_add_signed(d),
            io::SeekFrom::Current(d) => self.offset.checked_add_signed(d),
        };
        self.offset = to.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the start"))?;
        Ok(self.offset)
    }
}
