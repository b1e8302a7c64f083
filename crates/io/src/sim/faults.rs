//! Fault injection: which call fails, and how.

use std::path::{Path, PathBuf};

use rand::Rng;

use crate::error::IoError;

/// A kind of call that a fault can be armed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimOp {
    /// `File::read_at`.
    Read,
    /// `File::write_at`.
    Write,
    /// `File::sync_data`.
    SyncData,
    /// `File::write_back`.
    WriteBack,
    /// `Storage::sync_dir`.
    SyncDir,
    /// `Storage::open` (with or without create).
    Open,
    /// `Storage::rename`; a path filter matches either name.
    Rename,
    /// `Storage::remove_file`.
    Remove,
    /// `File::allocate`.
    Allocate,
    /// `File::punch_hole`.
    PunchHole,
    /// `File::set_len`.
    SetLen,
}

impl SimOp {
    /// The operation name used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            SimOp::Read => "read",
            SimOp::Write => "write",
            SimOp::SyncData => "sync",
            SimOp::WriteBack => "write_back",
            SimOp::SyncDir => "sync_dir",
            SimOp::Open => "open",
            SimOp::Rename => "rename",
            SimOp::Remove => "remove_file",
            SimOp::Allocate => "allocate",
            SimOp::PunchHole => "punch_hole",
            SimOp::SetLen => "set_len",
        }
    }
}

/// How an armed call fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimFault {
    /// The call fails with `IoError::Os` carrying EIO (errno 5) and changes
    /// nothing, except `sync_data`, which also drops the file's pending
    /// operations for good (see the module docs).
    Eio,
    /// The call fails with `IoError::NoSpace` and changes nothing (a failed
    /// `sync_data` drops pending operations as with `Eio`).
    NoSpace,
    /// `write_at` writes only the first half of the buffer (at least one
    /// byte) and returns that count. `punch_hole` of more than one 4 KiB
    /// block punches the first half of the range (in whole blocks, at
    /// least one, never all) and then fails with EIO, as a punch
    /// interrupted part-way does. On any other call it acts as `Eio`.
    ShortWrite,
    /// `read_at` succeeds but one bit of the returned bytes, chosen by the
    /// seed, is flipped; the file is unchanged. On any other call it acts as
    /// `Eio`.
    BitFlip,
}

/// A fault waiting for its call.
#[derive(Clone, Debug)]
pub(super) struct ArmedFault {
    pub(super) op: SimOp,
    /// Only calls naming this path count, if set.
    pub(super) path: Option<PathBuf>,
    /// Matching calls still to come, this one included; fires at 1.
    pub(super) remaining: u64,
    pub(super) fault: SimFault,
}

/// Counts this call against every matching armed fault and returns the one
/// that comes due, removing it. If two come due on the same call, the one
/// armed first fires and the other fires on the next matching call.
pub(super) fn take_fault(faults: &mut Vec<ArmedFault>, op: SimOp, paths: &[&Path]) -> Option<SimFault> {
    let mut due = None;
    for (i, armed) in faults.iter_mut().enumerate() {
        let matches = armed.op == op
            && match armed.path.as_deref() {
                Some(p) => paths.contains(&p),
                None => true,
            };
        if !matches {
            continue;
        }
        if armed.remaining <= 1 {
            if due.is_none() {
                due = Some(i);
            }
            armed.remaining = 1;
        } else {
            armed.remaining -= 1;
        }
    }
    due.map(|i| faults.remove(i).fault)
}

/// The error a failing call returns.
pub(super) fn fault_error(fault: SimFault, op: SimOp, path: &Path) -> IoError {
    match fault {
        SimFault::NoSpace => IoError::NoSpace { path: path.to_path_buf() },
        SimFault::Eio | SimFault::ShortWrite | SimFault::BitFlip => {
            IoError::Os { op: op.name(), path: path.to_path_buf(), source: std::io::Error::from_raw_os_error(5) }
        }
    }
}

/// How many bytes a short write of `len` bytes writes.
pub(super) fn short_len(len: usize) -> usize {
    if len <= 1 {
        len
    } else {
        (len / 2).max(1)
    }
}

/// Flips one seed-chosen bit of `buf`, if it has any bytes.
pub(super) fn flip_bit(rng: &mut impl Rng, buf: &mut [u8]) {
    if buf.is_empty() {
        return;
    }
    let byte = rng.gen_range(0..buf.len());
    let bit = rng.gen_range(0..8u32);
    buf[byte] ^= 1 << bit;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn armed(op: SimOp, remaining: u64, path: Option<&str>) -> ArmedFault {
        ArmedFault { op, path: path.map(PathBuf::from), remaining, fault: SimFault::Eio }
    }

    #[test]
    fn nth_matching_call_fires_once() {
        let mut faults = vec![armed(SimOp::Write, 3, None)];
        let p = Path::new("/a");
        assert_eq!(take_fault(&mut faults, SimOp::Read, &[p]), None);
        assert_eq!(take_fault(&mut faults, SimOp::Write, &[p]), None);
        assert_eq!(take_fault(&mut faults, SimOp::Write, &[p]), None);
        assert_eq!(take_fault(&mut faults, SimOp::Write, &[p]), Some(SimFault::Eio));
        assert_eq!(take_fault(&mut faults, SimOp::Write, &[p]), None);
    }

    #[test]
    fn path_filter_ignores_other_paths() {
        let mut faults = vec![armed(SimOp::Write, 1, Some("/b"))];
        assert_eq!(take_fault(&mut faults, SimOp::Write, &[Path::new("/a")]), None);
        assert_eq!(take_fault(&mut faults, SimOp::Write, &[Path::new("/b")]), Some(SimFault::Eio));
    }

    #[test]
    fn two_due_at_once_fire_on_consecutive_calls() {
        let mut faults = vec![armed(SimOp::Write, 1, None), armed(SimOp::Write, 1, None)];
        let p = Path::new("/a");
        assert!(take_fault(&mut faults, SimOp::Write, &[p]).is_some());
        assert!(take_fault(&mut faults, SimOp::Write, &[p]).is_some());
        assert!(take_fault(&mut faults, SimOp::Write, &[p]).is_none());
    }

    #[test]
    fn short_len_is_a_proper_prefix() {
        assert_eq!(short_len(0), 0);
        assert_eq!(short_len(1), 1);
        assert_eq!(short_len(2), 1);
        assert_eq!(short_len(9), 4);
    }
}
