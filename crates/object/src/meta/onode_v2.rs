//! The compact onode layout (version 2; docs/format.md, section 13): the
//! version-1 fields in minimal varints, zero flags and device numbers left
//! out, and atime, mtime and ctime as nanosecond differences from btime.
//!
//! Canonical as version 1 is: varints must be minimal, an optional field
//! present must be nonzero, and whole timestamps are stored only when a
//! difference does not fit 64 bits; so a version-2 onode that decodes
//! re-encodes to the same bytes.

use larder_io::codec::put_varint;

use super::codec::{DecodeResult, Reader};
use super::onode::{DataLocation, DirInfo, InlineBytes, Onode, ONODE_VERSION};
use super::types::{Kind, MetaLimits, Timestamp};

/// `present` bit: a nonzero flags word follows.
const HAS_FLAGS: u8 = 1 << 0;
/// `present` bit: a nonzero device number follows.
const HAS_RDEV: u8 = 1 << 1;
/// `present` bit: atime, mtime and ctime are whole (some difference from
/// btime does not fit an `i64` of nanoseconds).
const WHOLE_TIMES: u8 = 1 << 2;
const KNOWN_PRESENT: u8 = HAS_FLAGS | HAS_RDEV | WHOLE_TIMES;

const NANOS: i128 = 1_000_000_000;

fn nanos(t: Timestamp) -> i128 {
    i128::from(t.secs) * NANOS + i128::from(t.nanos)
}

/// `t - base` in nanoseconds, if it fits an `i64`.
fn delta(t: Timestamp, base: Timestamp) -> Option<i64> {
    i64::try_from(nanos(t) - nanos(base)).ok()
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Encodes `onode` (already checked) in the compact layout.
pub(super) fn encode(onode: &Onode) -> Vec<u8> {
    let inline = match &onode.location {
        DataLocation::Inline(d) => d.len(),
        _ => 0,
    };
    let mut b = Vec::with_capacity(48 + inline);
    b.push(ONODE_VERSION);
    b.push(onode.kind.to_u8());
    b.push(onode.location.tag());
    let base = onode.btime;
    // An array, not a collected Vec: an encode allocates only its bytes.
    let deltas = match [onode.atime, onode.mtime, onode.ctime].map(|t| delta(t, base)) {
        [Some(a), Some(m), Some(c)] => Some([a, m, c]),
        _ => None,
    };
    let mut present = 0;
    if onode.flags != 0 {
        present |= HAS_FLAGS;
    }
    if onode.rdev != 0 {
        present |= HAS_RDEV;
    }
    if deltas.is_none() {
        present |= WHOLE_TIMES;
    }
    b.push(present);
    put_varint(&mut b, onode.size);
    for v in [onode.mode, onode.uid, onode.gid, onode.nlink] {
        put_varint(&mut b, u64::from(v));
    }
    put_varint(&mut b, onode.generation);
    if onode.flags != 0 {
        put_varint(&mut b, u64::from(onode.flags));
    }
    if onode.rdev != 0 {
        b.extend_from_slice(&onode.rdev.to_le_bytes());
    }
    base.put(&mut b);
    match deltas {
        Some(d) => d.iter().for_each(|&d| put_varint(&mut b, zigzag(d))),
        None => [onode.atime, onode.mtime, onode.ctime].iter().for_each(|t| t.put(&mut b)),
    }
    if let Some(d) = onode.dir {
        put_varint(&mut b, d.parent);
        put_varint(&mut b, d.entries);
    }
    match &onode.location {
        DataLocation::Inline(d) => b.extend_from_slice(d),
        DataLocation::Extents => {}
        DataLocation::OwnFile { file } => put_varint(&mut b, *file),
    }
    b
}

/// A varint that must be in its shortest form.
fn varint(r: &mut Reader<'_>, what: &str) -> DecodeResult<u64> {
    let before = r.remaining();
    let v = r.varint(what)?;
    // Bytes of the shortest form: 7 bits each, at least one.
    let shortest = (64 - v.leading_zeros()).max(1).div_ceil(7) as usize;
    if before - r.remaining() != shortest {
        return Err(format!("{what}: varint not in its shortest form"));
    }
    Ok(v)
}

fn varint_u32(r: &mut Reader<'_>, what: &str) -> DecodeResult<u32> {
    u32::try_from(varint(r, what)?).map_err(|_| format!("{what}: above 32 bits"))
}

fn timestamp(r: &mut Reader<'_>, what: &str) -> DecodeResult<Timestamp> {
    Ok(Timestamp { secs: r.i64(what)?, nanos: r.u32(what)? })
}

/// `base` plus `d` nanoseconds, if the result is a timestamp.
fn shifted(base: Timestamp, d: i64, what: &str) -> DecodeResult<Timestamp> {
    let n = nanos(base) + i128::from(d);
    let secs = i64::try_from(n.div_euclid(NANOS)).map_err(|_| format!("{what}: out of range"))?;
    // rem_euclid of a positive modulus is in [0, 1e9): fits a u32.
    let nanos = u32::try_from(n.rem_euclid(NANOS)).map_err(|_| format!("{what}: out of range"))?;
    Ok(Timestamp { secs, nanos })
}

/// Decodes the compact layout after its version byte.
pub(super) fn decode(r: &mut Reader<'_>, limits: &MetaLimits, inline: InlineBytes) -> DecodeResult<Onode> {
    let kind_byte = r.u8("kind")?;
    let kind = Kind::from_u8(kind_byte).ok_or_else(|| format!("unknown kind {kind_byte}"))?;
    let tag = r.u8("location tag")?;
    let present = r.u8("present fields")?;
    if present & !KNOWN_PRESENT != 0 {
        return Err(format!("unknown present-field bits {:#x}", present & !KNOWN_PRESENT));
    }
    let size = varint(r, "size")?;
    let mode = varint_u32(r, "mode")?;
    let uid = varint_u32(r, "uid")?;
    let gid = varint_u32(r, "gid")?;
    let nlink = varint_u32(r, "nlink")?;
    let generation = varint(r, "generation")?;
    let flags = if present & HAS_FLAGS != 0 { varint_u32(r, "flags")? } else { 0 };
    let rdev = if present & HAS_RDEV != 0 { r.u64("rdev")? } else { 0 };
    if (present & HAS_FLAGS != 0 && flags == 0) || (present & HAS_RDEV != 0 && rdev == 0) {
        return Err("an optional field is present but zero".into());
    }
    let btime = timestamp(r, "btime")?;
    btime.check("btime")?;
    let [atime, mtime, ctime] = if present & WHOLE_TIMES != 0 {
        let t = [timestamp(r, "atime")?, timestamp(r, "mtime")?, timestamp(r, "ctime")?];
        if t.iter().all(|&t| delta(t, btime).is_some()) {
            return Err("whole timestamps that differences would hold".into());
        }
        t
    } else {
        [
            shifted(btime, unzigzag(varint(r, "atime")?), "atime")?,
            shifted(btime, unzigzag(varint(r, "mtime")?), "mtime")?,
            shifted(btime, unzigzag(varint(r, "ctime")?), "ctime")?,
        ]
    };
    let dir = if kind == Kind::Directory {
        Some(DirInfo { parent: varint(r, "directory parent")?, entries: varint(r, "directory entry count")? })
    } else {
        None
    };
    let location = super::onode::location(r, tag, size, limits, inline, |r| varint(r, "heap file id"))?;
    r.finish()?;
    let onode =
        Onode { kind, flags, size, mode, uid, gid, nlink, generation, atime, mtime, ctime, btime, rdev, location, dir };
    onode.check_decoded(limits, inline)?;
    Ok(onode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortest_forms_are_accepted_and_longer_ones_refused() {
        for v in [0u64, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(varint(&mut Reader::new(&b), "v").ok(), Some(v), "{v}");
            // The same value with a redundant continuation byte.
            if b.len() < 10 {
                let last = b.len() - 1;
                b[last] |= 0x80;
                b.push(0);
                assert!(varint(&mut Reader::new(&b), "v").is_err(), "{v} padded");
            }
        }
    }

    #[test]
    fn zigzag_round_trips_the_edges() {
        for v in [0, 1, -1, 2, -2, i64::MAX, i64::MIN, 1_000_000, -1_000_000] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn shifting_crosses_second_boundaries_both_ways() {
        let base = Timestamp { secs: 10, nanos: 999_999_999 };
        assert_eq!(shifted(base, 1, "t").ok(), Some(Timestamp { secs: 11, nanos: 0 }));
        let base = Timestamp { secs: -5, nanos: 0 };
        assert_eq!(shifted(base, -1, "t").ok(), Some(Timestamp { secs: -6, nanos: 999_999_999 }));
        assert!(shifted(Timestamp { secs: i64::MAX, nanos: 999_999_999 }, i64::MAX, "t").is_err());
    }
}
