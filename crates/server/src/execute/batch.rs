//! Batches of metadata requests, applied atomically through
//! `Fs::apply_batch`: every request, or (on the first refusal) none.

use larder_fs::{BatchDone, BatchOp, FsError};
use larder_protocol::message::{Durability, Request, Response};

use super::names::known;
use super::{Call, Refusal};
use crate::convert;

/// What a batch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Every request was applied: one response each, in order
    /// (`Attributes` for a create or link, `Done` for the others).
    Applied(Vec<Response>),
    /// Nothing was applied: why (the first refusal, naming its position).
    Refused(Response),
}

/// The batch operation a request is; EINVAL for a request a batch cannot
/// hold. The objects it names must have been reached by the session.
fn operation(call: &Call<'_>, i: usize, request: Request) -> Result<BatchOp, Refusal> {
    let op = match request {
        Request::Mkdir { parent, name, mode } => BatchOp::Mkdir { parent, name, mode },
        Request::Mknod { parent, name, mode, rdev } => BatchOp::Mknod { parent, name, mode, rdev },
        Request::Symlink { parent, name, target } => BatchOp::Symlink { parent, name, target },
        Request::Link { ino, parent, name } => BatchOp::Link { ino, parent, name },
        Request::Unlink { parent, name } => BatchOp::Unlink { parent, name },
        Request::Rmdir { parent, name } => BatchOp::Rmdir { parent, name },
        Request::Rename { parent, name, new_parent, new_name, flags } => {
            BatchOp::Rename { parent, name, new_parent, new_name, flags: convert::rename_flags(flags) }
        }
        other => {
            return Err(FsError::posix(
                libc::EINVAL,
                format!("operation {i} of the batch: {other:?} is not a metadata operation a batch may hold"),
            )
            .into())
        }
    };
    let inos: &[u64] = match &op {
        BatchOp::Mkdir { parent, .. }
        | BatchOp::Mknod { parent, .. }
        | BatchOp::Symlink { parent, .. }
        | BatchOp::Unlink { parent, .. }
        | BatchOp::Rmdir { parent, .. } => &[*parent],
        BatchOp::Link { ino, parent, .. } => &[*ino, *parent],
        BatchOp::Rename { parent, new_parent, .. } => &[*parent, *new_parent],
    };
    known(call, inos)?;
    Ok(op)
}

/// Applies `requests` as one batch.
pub(super) fn apply(call: &Call<'_>, requests: Vec<Request>, durability: Durability) -> Result<Vec<Response>, Refusal> {
    let ops =
        requests.into_iter().enumerate().map(|(i, r)| operation(call, i, r)).collect::<Result<Vec<_>, Refusal>>()?;
    let done = call.fs.apply_batch(call.cred, &ops, convert::durability(durability))?;
    Ok(done
        .into_iter()
        .map(|d| match d {
            BatchDone::Made(attr) => {
                // Made by this session: reached (unless its set is full; the
                // objects exist now whatever it holds).
                let _ = call.session.learn(attr.ino);
                Response::Attributes(convert::attributes(&attr))
            }
            BatchDone::Done => Response::Done,
        })
        .collect())
}
