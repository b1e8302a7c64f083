//! The executor: one request of one session in, one response out.
//!
//! Each area has its file: names and attributes (`names.rs`), open files
//! (`files.rs`, and by path in one request `open_path.rs`), directories and extended attributes (`directories.rs`),
//! the KV API (`kv.rs`, with its permission rule in `kv_access.rs`).

mod batch;
mod directories;
mod files;
mod heap;
mod kv;
mod kv_access;
mod names;
mod open_path;

use std::cell::Cell;

use larder_fs::{Cred, Fs, FsError};
use larder_kv::KvError;
use larder_protocol::message::{Durability, Payload, Request, Response};

use crate::convert;
use crate::error::Violation;
use crate::memory::ClientMemory;
use crate::session::{InFlight, Session};
use crate::ServerState;

pub use batch::BatchOutcome;

/// Executes `request` of `session`: the response to send, or the
/// [`Violation`] for which the session must end (a buffer slice outside
/// the client's data area). Refused with EAGAIN when the session has
/// `max_in_flight` requests executing already.
pub fn execute(
    server: &ServerState,
    session: &Session,
    request: Request,
    memory: &dyn ClientMemory,
) -> Result<Response, Violation> {
    match session.admit() {
        Ok(in_flight) => execute_admitted(server, session, in_flight, request, memory),
        Err(refused) => {
            let response = convert::errno(refused.errno(), refused.to_string());
            session.count(&response, 0, 0);
            Ok(response)
        }
    }
}

/// [`execute`] for a request already counted in flight by
/// [`Session::admit`]; the count ends when this returns. A request that
/// changes what other sessions' leases cover revokes them first, waiting
/// until each is acknowledged or has expired (at most one lease term);
/// the server's workers instead defer such a request and go on serving
/// others (`revocation_for`, `execute_revoked`).
pub fn execute_admitted(
    server: &ServerState,
    session: &Session,
    in_flight: InFlight<'_>,
    request: Request,
    memory: &dyn ClientMemory,
) -> Result<Response, Violation> {
    let mut revocation = revocation_for(server, session, &request);
    if let Some(revocation) = revocation.as_mut() {
        revocation.wait();
    }
    let response = execute_revoked(server, session, in_flight, request, memory);
    drop(revocation);
    response
}

/// Begins revoking what `request` of `session` changes, if anything
/// (`crate::conflicts`). Execute the request once the revocation is
/// settled, and drop it after.
pub(crate) fn revocation_for(
    server: &ServerState,
    session: &Session,
    request: &Request,
) -> Option<crate::leases::Revocation> {
    let holder = session.lease_holder()?;
    begin_revocation(server, holder, |subtrees| crate::conflicts::scope(server.fs(), session, request, subtrees))
}

/// Begins revoking the scope `scope_with(subtrees)` computes, naming the
/// subtree leases over the change once they are in use (computed again
/// with them if they came into use meanwhile).
fn begin_revocation(
    server: &ServerState,
    holder: &crate::leases::LeaseHolder,
    scope_with: impl Fn(bool) -> crate::leases::Scope,
) -> Option<crate::leases::Revocation> {
    let table = server.leases();
    let mut subtrees = table.subtrees_in_use();
    loop {
        let scope = scope_with(subtrees);
        if scope == crate::leases::Scope::Nothing {
            return None;
        }
        match table.begin(holder, scope, subtrees) {
            Ok(revocation) => return Some(revocation),
            // In use now, and for good: the next scope names them.
            Err(crate::leases::NeedsSubtrees) => subtrees = true,
        }
    }
}

/// [`execute`] for a request whose revocation (if it needs one) is
/// settled: refused with EAGAIN at `max_in_flight`.
pub(crate) fn execute_settled(
    server: &ServerState,
    session: &Session,
    request: Request,
    memory: &dyn ClientMemory,
) -> Result<Response, Violation> {
    match session.admit() {
        Ok(in_flight) => execute_revoked(server, session, in_flight, request, memory),
        Err(refused) => {
            let response = convert::errno(refused.errno(), refused.to_string());
            session.count(&response, 0, 0);
            Ok(response)
        }
    }
}

/// Executes a request whose revocation (if it needs one) is settled.
pub(crate) fn execute_revoked(
    server: &ServerState,
    session: &Session,
    in_flight: InFlight<'_>,
    request: Request,
    memory: &dyn ClientMemory,
) -> Result<Response, Violation> {
    let call = Call {
        server,
        session,
        memory,
        fs: server.fs(),
        cred: session.cred(),
        read: Cell::new(0),
        written: Cell::new(0),
    };
    let change = crate::path_cache::changes_paths(&request).then(|| server.path_changes().begin());
    let dispatched = dispatch(&call, request);
    drop(change);
    let response = match dispatched {
        Ok(r) => r,
        Err(Refusal::Violation(v)) => return Err(v),
        Err(Refusal::Fs(e)) => convert::fs_error(&e),
        Err(Refusal::Kv(e)) => convert::kv_error(e),
    };
    session.count(&response, call.read.get(), call.written.get());
    drop(in_flight);
    Ok(response)
}

/// Executes `requests` of `session`, metadata operations only (`Mkdir`,
/// `Mknod`, `Symlink`, `Link`, `Unlink`, `Rmdir`, `Rename`), as one batch
/// committed with `durability`: each is checked as it would be alone, on
/// the state the earlier ones left, and either all are applied or none.
/// Counted as one request in flight.
pub fn execute_batch(
    server: &ServerState,
    session: &Session,
    requests: Vec<Request>,
    durability: Durability,
) -> BatchOutcome {
    let in_flight = match session.admit() {
        Ok(in_flight) => in_flight,
        Err(refused) => {
            let response = convert::errno(refused.errno(), refused.to_string());
            session.count(&response, 0, 0);
            return BatchOutcome::Refused(response);
        }
    };
    let mut revocation = session.lease_holder().and_then(|holder| {
        begin_revocation(server, holder, |subtrees| {
            crate::conflicts::scope_of_all(server.fs(), session, &requests, subtrees)
        })
    });
    if let Some(revocation) = revocation.as_mut() {
        revocation.wait();
    }
    // No request of a batch names client memory.
    let memory = crate::memory::VecMemory::new(0);
    let call = Call {
        server,
        session,
        memory: &memory,
        fs: server.fs(),
        cred: session.cred(),
        read: Cell::new(0),
        written: Cell::new(0),
    };
    let change = requests.iter().any(crate::path_cache::changes_paths).then(|| server.path_changes().begin());
    let applied = batch::apply(&call, requests, durability);
    drop(change);
    let outcome = match applied {
        Ok(responses) => BatchOutcome::Applied(responses),
        Err(Refusal::Fs(e)) => BatchOutcome::Refused(convert::fs_error(&e)),
        Err(Refusal::Kv(e)) => BatchOutcome::Refused(convert::kv_error(e)),
        Err(Refusal::Violation(v)) => BatchOutcome::Refused(convert::errno(libc::EPROTO, v.to_string())),
    };
    let counted = match &outcome {
        BatchOutcome::Applied(_) => Response::Done,
        BatchOutcome::Refused(r) => r.clone(),
    };
    session.count(&counted, 0, 0);
    drop(in_flight);
    outcome
}

/// Why a request was not done.
pub(crate) enum Refusal {
    /// The client broke the protocol.
    Violation(Violation),
    /// A refusal or failure with the fs layer's errno.
    Fs(FsError),
    /// A refusal or failure of the KV layer.
    Kv(KvError),
}

impl From<Violation> for Refusal {
    fn from(v: Violation) -> Self {
        Refusal::Violation(v)
    }
}

impl From<FsError> for Refusal {
    fn from(e: FsError) -> Self {
        Refusal::Fs(e)
    }
}

impl From<KvError> for Refusal {
    fn from(e: KvError) -> Self {
        Refusal::Kv(e)
    }
}

/// What executing one request has at hand.
pub(crate) struct Call<'a> {
    pub(crate) server: &'a ServerState,
    pub(crate) session: &'a Session,
    pub(crate) memory: &'a dyn ClientMemory,
    pub(crate) fs: &'a Fs,
    pub(crate) cred: &'a Cred,
    /// Bytes returned to the client, for the session's counters.
    pub(crate) read: Cell<u64>,
    /// Bytes written for the client.
    pub(crate) written: Cell<u64>,
}

/// Results of executing.
pub(crate) type Outcome = Result<Response, Refusal>;

impl Call<'_> {
    /// The bytes of `payload`, copied into server memory (out of the data
    /// area for a buffer slice), at most `max_io_bytes` of them.
    pub(crate) fn payload(&self, payload: Payload) -> Result<Vec<u8>, Refusal> {
        let length = match &payload {
            Payload::Inline(bytes) => bytes.len(),
            Payload::Buffer(slice) => slice.length as usize,
        };
        let max = self.session.limits().max_io_bytes;
        // Checked before the copy, which the limit bounds.
        if length > max as usize {
            return Err(FsError::posix(
                libc::EMSGSIZE,
                format!("{length} bytes in one request, above the limit (max_io_bytes) of {max}"),
            )
            .into());
        }
        Ok(match payload {
            Payload::Inline(bytes) => bytes,
            Payload::Buffer(slice) => self.memory.copy_out(slice)?,
        })
    }

    /// `length` capped at `max_io_bytes`.
    pub(crate) fn io_length(&self, length: u64) -> usize {
        length.min(u64::from(self.session.limits().max_io_bytes)) as usize
    }

    /// `max` entries capped at `max_entries`.
    pub(crate) fn entries(&self, max: u32) -> usize {
        max.min(self.session.limits().max_entries) as usize
    }

    /// Bytes a listing's answer may take: one completion ring record, so
    /// that a page of long names or keys is cut short rather than refused
    /// as too large (the client asks for the next page from where it
    /// ends).
    pub(crate) fn listing_bytes(&self) -> usize {
        larder_protocol::ring::max_record(self.session.limits().ring_bytes) as usize
    }

    /// Counts bytes returned to the client.
    pub(crate) fn count_read(&self, n: usize) {
        self.read.set(self.read.get() + n as u64);
    }

    /// Counts bytes written for the client.
    pub(crate) fn count_written(&self, n: usize) {
        self.written.set(self.written.get() + n as u64);
    }
}

/// Grants or renews a lease: on an object the session reached, or on the
/// namespace.
fn lease(call: &Call<'_>, target: larder_protocol::message::LeaseTarget) -> Outcome {
    use larder_protocol::message::LeaseTarget;
    match target {
        LeaseTarget::Object(ino) => {
            call.session.check_known(ino)?;
            // No lease on an object without a name: a client would keep its
            // opens after close under it, and an unlinked file lives until
            // its last handle is released (ESTALE, as NFS answers for a
            // removed file; the client goes on uncached).
            if call.fs.getattr(ino)?.nlink == 0 {
                return Err(FsError::posix(libc::ESTALE, format!("object {ino} has no name left")).into());
            }
        }
        LeaseTarget::Subtree(ino) => {
            call.session.check_known(ino)?;
            let attributes = call.fs.getattr(ino)?;
            if attributes.kind != larder_fs::Kind::Directory {
                return Err(FsError::posix(libc::ENOTDIR, format!("object {ino} is not a directory")).into());
            }
            if attributes.nlink == 0 {
                return Err(FsError::posix(libc::ESTALE, format!("directory {ino} was removed")).into());
            }
        }
        LeaseTarget::Namespace => {}
    }
    let Some(holder) = call.session.lease_holder() else {
        return Err(FsError::posix(libc::EOPNOTSUPP, "this session holds no leases").into());
    };
    Ok(Response::Lease(call.server.leases().grant(holder, target)?))
}

fn dispatch(call: &Call<'_>, request: Request) -> Outcome {
    use Request as R;
    match request {
        R::Ping => Ok(Response::Pong { epoch: call.server.epoch() }),
        R::Lease { target } => lease(call, target),
        R::MetadataBatch { operations, durability } => {
            let responses = batch::apply(call, operations, durability)?;
            Ok(Response::BatchApplied(
                responses
                    .into_iter()
                    .map(|r| match r {
                        Response::Attributes(attributes) => Some(attributes),
                        _ => None,
                    })
                    .collect(),
            ))
        }
        R::Lookup { parent, name } => names::lookup(call, parent, &name),
        R::GetAttributes { ino } => names::getattr(call, ino),
        R::SetAttributes { ino, set, handle } => names::setattr(call, ino, &set, handle),
        R::Resolve { path, follow } => names::resolve(call, &path, follow),
        R::Mknod { parent, name, mode, rdev } => names::mknod(call, parent, &name, mode, rdev),
        R::Mkdir { parent, name, mode } => names::mkdir(call, parent, &name, mode),
        R::Symlink { parent, name, target } => names::symlink(call, parent, &name, &target),
        R::Readlink { ino } => names::readlink(call, ino),
        R::Link { ino, parent, name } => names::link(call, ino, parent, &name),
        R::Unlink { parent, name } => names::unlink(call, parent, &name),
        R::Rmdir { parent, name } => names::rmdir(call, parent, &name),
        R::Rename { parent, name, new_parent, new_name, flags } => {
            names::rename(call, (parent, &name), (new_parent, &new_name), flags)
        }
        R::Access { ino, mask } => names::access(call, ino, mask),
        R::StatFs => names::statfs(call),
        R::Sync => names::sync(call),
        R::Open { ino, flags } => files::open(call, ino, flags),
        R::OpenPath { path, flags, read, lease } => open_path::open_path(call, &path, flags, read, lease),
        R::Create { parent, name, mode, flags, lease } => files::create(call, parent, &name, mode, flags, lease),
        R::Read { handle, offset, length } => files::read(call, handle, offset, length),
        R::ReadBuffer { handle, offset, into } => files::read_buffer(call, handle, offset, into),
        R::Write { handle, offset, data } => files::write(call, handle, offset, data),
        R::Fsync { handle } => files::fsync(call, handle),
        R::Fallocate { handle, offset, length, mode } => files::fallocate(call, handle, offset, length, mode),
        R::Release { handle } => files::release(call, handle),
        R::OpenDirectory { ino } => directories::open(call, ino),
        R::ReadDirectory { handle, offset, max_entries } => directories::read(call, handle, offset, max_entries),
        R::ReleaseDirectory { handle } => directories::release(call, handle),
        R::FsyncDirectory { handle } => directories::fsync(call, handle),
        R::GetXattr { ino, name } => directories::getxattr(call, ino, &name),
        R::SetXattr { ino, name, value, flags } => directories::setxattr(call, ino, &name, &value, flags),
        R::ListXattr { ino } => directories::listxattr(call, ino),
        R::RemoveXattr { ino, name } => directories::removexattr(call, ino, &name),
        R::KvPut { bucket, key, value, durability } => kv::put(call, &bucket, &key, value, durability),
        R::KvGet { bucket, key, into } => kv::get(call, &bucket, &key, into),
        R::KvHead { bucket, key } => kv::head(call, &bucket, &key),
        R::KvDelete { bucket, key, durability } => kv::delete(call, &bucket, &key, durability),
        R::KvScan { bucket, start, end, max_entries } => kv::scan(call, &bucket, &start, end.as_deref(), max_entries),
        R::KvWriteBatch { bucket, operations, durability } => kv::write_batch(call, &bucket, operations, durability),
        R::KvWriterOpen { bucket, key, durability } => kv::writer_open(call, &bucket, &key, durability),
        R::KvWriterFinish { handle } => kv::writer_finish(call, handle),
        R::KvReaderOpen { bucket, key } => kv::reader_open(call, &bucket, &key),
        R::CreateBucket { bucket } => kv::create_bucket(call, &bucket),
        R::DeleteBucket { bucket } => kv::delete_bucket(call, &bucket),
        R::ListBuckets => kv::list_buckets(call),
        R::Stats => kv::stats(call),
        R::HeapOpen { path } => heap::open(call, &path),
        R::Heap { heap, operation } => heap::operation(call, heap, operation),
        R::HeapClose { heap, sync } => heap::close(call, heap, sync),
    }
}
