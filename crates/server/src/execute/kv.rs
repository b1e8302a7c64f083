//! The KV API: each call checked by the rule of `kv_access.rs`, then made
//! through the session's `Kv`, whose new objects and levels belong to the
//! client's uid and gid.

use std::collections::HashSet;
use std::sync::Arc;

use larder_fs::{perm, FsError};
use larder_kv::KvBatch;
use larder_protocol::codec::{scan_entry_bytes, LISTING_BASE_BYTES};
use larder_protocol::message::{BufferSlice, Durability, KeyHead, KvOperation, Payload, Response};
use parking_lot::Mutex;

use super::kv_access::{self, Change, ScanLevels};
use super::{Call, Outcome, Refusal};
use crate::convert;
use crate::session::{Entry, HandleKind};

pub(super) fn put(call: &Call<'_>, bucket: &[u8], key: &[u8], value: Payload, durability: Durability) -> Outcome {
    // Copied out of the client's memory before anything looks at it.
    let value = call.payload(value)?;
    let path = kv_access::walk(call, bucket, key)?;
    kv_access::check_write(call, &path, Change::Put)?;
    call.session.kv().put(bucket, key, &value, convert::durability(durability))?;
    call.count_written(value.len());
    if let Some(leaf) = path.value() {
        drop_privileges(call, leaf.ino)?;
    }
    Ok(Response::Done)
}

/// A put rewrote value `ino` in place: as a write through the file system
/// does, it drops the setuid and setgid bits a caller without the
/// privilege may not leave behind (`perm::kill_suid`).
fn drop_privileges(call: &Call<'_>, ino: u64) -> Result<(), Refusal> {
    let Some(onode) = call.fs.store().stat(ino).map_err(larder_kv::KvError::from)? else { return Ok(()) };
    if let Some(mode) = perm::kill_suid(&onode, call.cred) {
        let set = larder_fs::SetAttr { mode: Some(mode), ..larder_fs::SetAttr::default() };
        call.fs.setattr(&larder_fs::Cred::root(), ino, &set, None)?;
    }
    Ok(())
}

/// Most bytes a value answered inline may have: what a completion record
/// holds (a quarter of the ring) less room for the message's header, and
/// never above the request limit.
fn inline_value_limit(call: &Call<'_>) -> u64 {
    let limits = call.session.limits();
    let record = u64::from(larder_protocol::ring::max_record(limits.ring_bytes)).saturating_sub(4096);
    record.min(larder_protocol::codec::MAX_DATA_BYTES as u64).min(u64::from(limits.max_io_bytes))
}

pub(super) fn get(call: &Call<'_>, bucket: &[u8], key: &[u8], into: Option<BufferSlice>) -> Outcome {
    if let Some(slice) = into {
        call.memory.check(slice)?;
    }
    let path = kv_access::walk(call, bucket, key)?;
    kv_access::check_read(call, &path)?;
    // Read through a reader, never more than the answer may carry: a
    // value's size is the client's to choose (a sparse file of 2^45
    // bytes included), the server's memory is not.
    let Some(mut reader) = call.session.kv().reader(bucket, key)? else {
        return Ok(Response::Value(None));
    };
    let size = reader.size();
    let limit = match into {
        Some(slice) => u64::from(slice.length),
        None => inline_value_limit(call),
    };
    if size > limit {
        return match into {
            Some(_) => Ok(Response::ValueInBuffer { length: size }),
            None => Err(FsError::posix(
                libc::EFBIG,
                format!("a value of {size} bytes, above the {limit} one answer carries: read it with a reader"),
            )
            .into()),
        };
    }
    let mut value = Vec::with_capacity(size as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(&mut reader, limit), &mut value)
        .map_err(|e| FsError::posix(e.raw_os_error().unwrap_or(libc::EIO), format!("reading the value: {e}")))?;
    call.count_read(value.len());
    match into {
        Some(slice) => {
            call.memory.copy_in(slice, &value)?;
            Ok(Response::ValueInBuffer { length: value.len() as u64 })
        }
        None => Ok(Response::Value(Some(value))),
    }
}

pub(super) fn head(call: &Call<'_>, bucket: &[u8], key: &[u8]) -> Outcome {
    kv_access::walk(call, bucket, key)?;
    let head = call.session.kv().head(bucket, key)?;
    Ok(Response::Head(head.map(|h| KeyHead { object: h.object, size: h.size })))
}

pub(super) fn delete(call: &Call<'_>, bucket: &[u8], key: &[u8], durability: Durability) -> Outcome {
    let path = kv_access::walk(call, bucket, key)?;
    kv_access::check_write(call, &path, Change::Delete)?;
    Ok(Response::Deleted(call.session.kv().delete(bucket, key, convert::durability(durability))?))
}

pub(super) fn scan(call: &Call<'_>, bucket: &[u8], start: &[u8], end: Option<&[u8]>, max_entries: u32) -> Outcome {
    let dir = kv_access::bucket(call, bucket)?;
    call.fs.access(call.cred, dir, perm::READ | perm::EXEC)?;
    let max = call.entries(max_entries);
    let mut levels = ScanLevels::new(dir);
    let mut entries = Vec::new();
    let mut more = false;
    // As many as `max` and one ring record allow (at least one: a key
    // longer than a record is refused as too large when the answer is
    // sent).
    let (budget, mut used) = (call.listing_bytes(), LISTING_BASE_BYTES);
    for entry in call.session.kv().scan_range(bucket, start, end)? {
        let entry = entry?;
        if !levels.check(call, &entry.key)? {
            continue;
        }
        let entry = convert::scan_entry(entry);
        used += scan_entry_bytes(&entry);
        if entries.len() == max || (used > budget && !entries.is_empty()) {
            more = true;
            break;
        }
        entries.push(entry);
    }
    Ok(Response::ScanPage { entries, more })
}

pub(super) fn write_batch(
    call: &Call<'_>,
    bucket: &[u8],
    operations: Vec<KvOperation>,
    durability: Durability,
) -> Outcome {
    // The values' total is checked before any is copied (a batch may name
    // the whole data area many times over); then every value is copied
    // out: a bad slice anywhere ends the session before anything is
    // checked or written.
    let max = call.session.limits().max_io_bytes as usize;
    let mut total = 0usize;
    for op in &operations {
        if let KvOperation::Put { value, .. } = op {
            total = total.saturating_add(match value {
                Payload::Inline(bytes) => bytes.len(),
                Payload::Buffer(slice) => slice.length as usize,
            });
        }
    }
    if total > max {
        return Err(FsError::posix(
            libc::EMSGSIZE,
            format!("a batch of {total} bytes of values, above the limit (max_io_bytes) of {max}"),
        )
        .into());
    }
    let mut ops = Vec::with_capacity(operations.len());
    for op in operations {
        ops.push(match op {
            KvOperation::Put { key, value } => (key, Some(call.payload(value)?)),
            KvOperation::Delete { key } => (key, None),
        });
    }
    // Validated op by op; any refusal refuses the whole batch.
    let mut batch = KvBatch::new();
    // Keys deleted by the operations so far: the KV batch applies each
    // operation to the state the earlier ones left, so a put under a value
    // an earlier operation deleted is not blocked by it.
    let mut deleted: HashSet<&[u8]> = HashSet::new();
    for (key, value) in &ops {
        let mut path = kv_access::walk(call, bucket, key)?;
        if path.blocked && value.is_some() && deleted.contains(kv_access::blocking_value(key, &path)) {
            path.blocked = false;
        }
        let change = if value.is_some() { Change::Put } else { Change::Delete };
        kv_access::check_write(call, &path, change)?;
        match value {
            Some(v) => {
                deleted.remove(key.as_slice());
                batch.put(key, v.clone())
            }
            None => {
                deleted.insert(key);
                batch.delete(key)
            }
        };
    }
    call.session.kv().write_batch(bucket, &batch, convert::durability(durability))?;
    call.count_written(total);
    Ok(Response::Done)
}

pub(super) fn writer_open(call: &Call<'_>, bucket: &[u8], key: &[u8], durability: Durability) -> Outcome {
    let path = kv_access::walk(call, bucket, key)?;
    kv_access::check_write(call, &path, Change::Replace)?;
    let slot = call.session.reserve()?;
    let writer = call.session.kv().shared_writer(bucket, key, convert::durability(durability))?;
    let object = writer.object();
    let writer = Arc::new(Mutex::new(Some(writer)));
    Ok(Response::Handle(slot.fill(Entry::Writer { writer, object, bucket: bucket.to_vec(), key: key.to_vec() })))
}

pub(super) fn writer_finish(call: &Call<'_>, handle: u64) -> Outcome {
    let Entry::Writer { writer, bucket, key, .. } = call.session.take(handle, HandleKind::KvWriter)? else {
        return Err(super::files::not_open(handle).into());
    };
    // Taken out: dropped unfinished (its object freed) if refused below.
    let writer = writer.lock().take().ok_or_else(|| super::files::not_open(handle))?;
    // Checked again: the bucket or key may have changed since the open.
    let path = kv_access::walk(call, &bucket, &key)?;
    kv_access::check_write(call, &path, Change::Replace)?;
    writer.finish()?;
    Ok(Response::Done)
}

pub(super) fn reader_open(call: &Call<'_>, bucket: &[u8], key: &[u8]) -> Outcome {
    let path = kv_access::walk(call, bucket, key)?;
    kv_access::check_read(call, &path)?;
    let slot = call.session.reserve()?;
    let Some(head) = call.session.kv().head(bucket, key)? else {
        return Err(FsError::posix(libc::ENOENT, format!("no key {:?}", String::from_utf8_lossy(key))).into());
    };
    let handle = slot.fill(Entry::Reader { object: head.object });
    Ok(Response::Opened { handle, size: head.size })
}

pub(super) fn create_bucket(call: &Call<'_>, bucket: &[u8]) -> Outcome {
    larder_kv::key::check_bucket(bucket)?;
    // As mkdir in the root would be.
    call.fs.access(call.cred, call.fs.root(), perm::WRITE | perm::EXEC)?;
    call.session.kv().create_bucket(bucket)?;
    Ok(Response::Done)
}

pub(super) fn delete_bucket(call: &Call<'_>, bucket: &[u8]) -> Outcome {
    let dir = kv_access::bucket(call, bucket)?;
    // As rmdir in the root would be.
    kv_access::check_remove(call, call.fs.root(), dir)?;
    call.session.kv().delete_bucket(bucket)?;
    Ok(Response::Done)
}

pub(super) fn list_buckets(call: &Call<'_>) -> Outcome {
    // As listing the root would be.
    call.fs.access(call.cred, call.fs.root(), perm::READ)?;
    Ok(Response::Names(call.session.kv().buckets()?))
}

pub(super) fn stats(call: &Call<'_>) -> Outcome {
    let text = larder_kv::stats::report(call.session.kv()).map_err(Refusal::from)?;
    Ok(Response::Text(text))
}
