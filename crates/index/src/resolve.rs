//! Turns the versions of one key into what a read sees, or into what a
//! flush or merge keeps. The one place where puts, deletes, range
//! tombstones and merge operands are combined.

use crate::entry::{Op, Stamp};
use crate::error::Result;
use crate::merge::Registry;

/// The value a read sees, given the key's visible versions newest first and
/// the newest range tombstone covering it.
pub(crate) fn resolve_read(
    registry: &Registry,
    key: &[u8],
    versions: &[(Stamp, Op)],
    covering: Option<Stamp>,
) -> Result<Option<Vec<u8>>> {
    let mut operands: Vec<(u32, &[u8])> = Vec::new();
    let mut base: Option<Vec<u8>> = None;
    for (stamp, op) in versions {
        if covering.is_some_and(|c| *stamp < c) {
            break;
        }
        match op {
            Op::Put(v) => {
                base = Some(v.clone());
                break;
            }
            Op::Delete => break,
            Op::Merge { operator, operand } => operands.push((*operator, operand)),
        }
    }
    if operands.is_empty() {
        return Ok(base);
    }
    operands.reverse();
    registry.fold(key, base, &operands)
}

/// What a flush or merge writes for one key. `versions` are all versions of
/// the key in the runs being combined, newest first; `covering` is the
/// newest tombstone among them covering the key; `bottom` says no older run
/// exists, so deletes and tombstones can be dropped and operands resolved.
/// Snapshots pin the runs they read, so only the newest state is kept.
pub(crate) fn resolve_output(
    registry: &Registry,
    key: &[u8],
    versions: &[(Stamp, Op)],
    covering: Option<Stamp>,
    bottom: bool,
    out: &mut Vec<(Stamp, Op)>,
) {
    let mut n_operands = 0;
    let mut base: Option<&(Stamp, Op)> = None;
    let mut covered = false;
    for v in versions {
        if covering.is_some_and(|c| v.0 < c) {
            covered = true;
            break;
        }
        match v.1 {
            Op::Merge { .. } => n_operands += 1,
            _ => {
                base = Some(v);
                break;
            }
        }
    }
    let operands = &versions[..n_operands];
    if operands.is_empty() {
        match base {
            Some((s, Op::Put(v))) => out.push((*s, Op::Put(v.clone()))),
            Some((s, _)) if !bottom => out.push((*s, Op::Delete)),
            // Deleted at the bottom, covered by a kept tombstone, or absent.
            _ => {}
        }
        return;
    }
    if base.is_none() && !covered && !bottom {
        // Older runs may hold the base: keep the operands as they are.
        out.extend(operands.iter().cloned());
        return;
    }
    let base_value = match base {
        Some((_, Op::Put(v))) => Some(v.clone()),
        _ => None,
    };
    let ops: Vec<(u32, &[u8])> = operands
        .iter()
        .rev()
        .filter_map(|(_, op)| match op {
            Op::Merge { operator, operand } => Some((*operator, operand.as_slice())),
            _ => None,
        })
        .collect();
    let newest = operands[0].0;
    match registry.fold(key, base_value, &ops) {
        Ok(Some(v)) => out.push((newest, Op::Put(v))),
        Ok(None) if !bottom => out.push((newest, Op::Delete)),
        Ok(None) => {}
        Err(e) => {
            // Keep the inputs so no data is lost; reads report the failure.
            tracing::warn!(error = %e, "merge operator failed during a flush or merge; keeping operands");
            out.extend(operands.iter().cloned());
            if let Some(b) = base {
                out.push(b.clone());
            }
        }
    }
}
