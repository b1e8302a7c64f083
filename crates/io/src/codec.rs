//! Explicit little-endian encoding and bounds-checked decoding, shared by
//! every on-disk and wire format of the engine.
//!
//! Every decoder of bytes read from disk goes through [`Decoder`], which
//! never panics: a short or malformed input yields a `what` string that the
//! caller turns into its layer's error, naming the file, offset or record.

/// Appends a LEB128 varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a u16, little-endian.
pub fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a u32, little-endian.
#[inline]
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a u64, little-endian.
#[inline]
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a length-prefixed (varint) byte string.
#[inline]
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A cursor over bytes read from disk; every read is bounds-checked.
#[derive(Debug)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// Why a decode failed (turned into a `Corrupt` error by the caller).
pub type DecodeResult<T> = std::result::Result<T, String>;

impl<'a> Decoder<'a> {
    /// A decoder at the start of `buf`.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    /// Bytes left.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes.
    #[inline]
    pub fn bytes(&mut self, n: usize, what: &str) -> DecodeResult<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.short(n, what)),
        }
    }

    #[inline]
    fn array<const N: usize>(&mut self, what: &str) -> DecodeResult<[u8; N]> {
        let s = self.bytes(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// A little-endian `u8`.
    #[inline]
    pub fn u8(&mut self, what: &str) -> DecodeResult<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    /// A little-endian `u16`.
    #[inline]
    pub fn u16(&mut self, what: &str) -> DecodeResult<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    /// A little-endian `u32`.
    #[inline]
    pub fn u32(&mut self, what: &str) -> DecodeResult<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// A little-endian `u64`.
    #[inline]
    pub fn u64(&mut self, what: &str) -> DecodeResult<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Why `n` bytes cannot be read (out of line: decoders inline the
    /// reads, not their errors).
    #[cold]
    #[inline(never)]
    fn short(&self, n: usize, what: &str) -> String {
        format!("{what}: needs {n} bytes at {}, only {} left", self.pos, self.remaining())
    }

    /// A LEB128 varint of at most 10 bytes.
    #[inline]
    pub fn varint(&mut self, what: &str) -> DecodeResult<u64> {
        // Fast path, inlined: most lengths fit one byte.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        self.long_varint(what)
    }

    /// A varint of more than one byte (or none left).
    #[inline(never)]
    fn long_varint(&mut self, what: &str) -> DecodeResult<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8(what)?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                if shift == 63 && b > 1 {
                    return Err(format!("{what}: varint overflows 64 bits"));
                }
                return Ok(v);
            }
        }
        Err(format!("{what}: varint longer than 10 bytes"))
    }

    /// A little-endian `i64`.
    pub fn i64(&mut self, what: &str) -> DecodeResult<i64> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }

    /// A big-endian `u64`: only index keys use it, so that byte order sorts
    /// numerically.
    pub fn u64_be(&mut self, what: &str) -> DecodeResult<u64> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    /// Everything not yet read.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = self.buf.get(self.pos..).unwrap_or(&[]);
        self.pos = self.buf.len();
        s
    }

    /// Refuses bytes after the last field: a value with a tail would decode
    /// to something that does not re-encode to the same bytes.
    pub fn finish(&self) -> DecodeResult<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(format!("{n} trailing bytes after the last field at offset {}", self.pos)),
        }
    }

    /// Checks a count just read from disk against the bytes left: `n` items
    /// of at least `min_item_bytes` each must fit in them. Returns the
    /// count, now safe to size an allocation or bound a loop with; a
    /// corrupt count is refused before anything is allocated.
    pub fn count(&self, n: u64, min_item_bytes: usize, what: &str) -> DecodeResult<usize> {
        let fits = usize::try_from(n)
            .ok()
            .filter(|&n| n.checked_mul(min_item_bytes.max(1)).is_some_and(|b| b <= self.remaining()));
        fits.ok_or_else(|| {
            format!(
                "{what} {n} cannot fit: {} bytes left at offset {}, at least {min_item_bytes} per item",
                self.remaining(),
                self.pos
            )
        })
    }

    /// A varint that must fit in `usize` and be at most `limit`.
    #[inline]
    pub fn len(&mut self, limit: usize, what: &str) -> DecodeResult<usize> {
        let v = self.varint(what)?;
        usize::try_from(v)
            .ok()
            .filter(|&n| n <= limit)
            .ok_or_else(|| format!("{what}: length {v} exceeds limit {limit}"))
    }

    /// A varint-length-prefixed byte string of at most `limit` bytes.
    #[inline]
    pub fn length_prefixed(&mut self, limit: usize, what: &str) -> DecodeResult<&'a [u8]> {
        let n = self.len(limit, what)?;
        self.bytes(n, what)
    }
}

/// crc32c (CRC-32/ISCSI) of `data`. Computed by `crc-fast`, which folds
/// with carry-less multiplies (VPCLMULQDQ where the CPU has it): 2.1-2.4x
/// the `crc32c` crate's three-way crc32 instructions on cached data here
/// (a 4 KiB block 0.09 against 0.20 µs, 16 KiB 0.31 against 0.72), and
/// every data block is checked on each read.
pub fn crc(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

/// Splits `buf` into (body, stored crc) and checks the crc.
pub fn check_trailing_crc(buf: &[u8]) -> DecodeResult<&[u8]> {
    if buf.len() < 4 {
        return Err(format!("block of {} bytes is too short for its checksum", buf.len()));
    }
    let (body, tail) = buf.split_at(buf.len() - 4);
    let mut a = [0u8; 4];
    a.copy_from_slice(tail);
    let stored = u32::from_le_bytes(a);
    let actual = crc(body);
    if stored != actual {
        return Err(format!("checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"));
    }
    Ok(body)
}

/// Reads a varint at `*pos` from bytes already validated, advancing `pos`;
/// returns 0 past the end instead of failing (callers validated first).
#[inline]
pub fn read_varint_unchecked(buf: &[u8], pos: &mut usize) -> u64 {
    // Most varints (lengths under 128) are one byte.
    if let Some(&b) = buf.get(*pos) {
        if b < 0x80 {
            *pos += 1;
            return u64::from(b);
        }
    }
    let mut v = 0u64;
    let mut shift = 0;
    while let Some(&b) = buf.get(*pos) {
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 || shift >= 63 {
            break;
        }
        shift += 7;
    }
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The fast crc is crc32c: against the `crc32c` crate (an independent
    /// implementation) at every length around the SIMD paths' strides and
    /// tails, at unaligned starts, and for 1 MiB.
    #[test]
    fn crc_is_crc32c_at_every_length_and_alignment() {
        let data: Vec<u8> = (0..(1usize << 20) + 64).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for start in 0..8 {
            for len in (0..1100).chain([4095, 4096, 4097, 16384, 65536 + 3]) {
                let b = &data[start..start + len];
                assert_eq!(crc(b), crc32c::crc32c(b), "start {start}, length {len}");
            }
        }
        assert_eq!(crc(&data[..1 << 20]), crc32c::crc32c(&data[..1 << 20]));
        assert_eq!(crc(b"123456789"), 0xe306_9283, "the CRC-32/ISCSI check value");
    }

    #[test]
    fn varint_round_trips_edges() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut d = Decoder::new(&b);
            assert_eq!(d.varint("v").unwrap(), v);
            assert_eq!(d.remaining(), 0);
        }
    }

    #[test]
    fn truncated_and_overlong_inputs_are_errors() {
        assert!(Decoder::new(&[0x80]).varint("v").is_err());
        assert!(Decoder::new(&[0xff; 11]).varint("v").is_err());
        assert!(Decoder::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]).varint("v").is_err());
        assert!(Decoder::new(&[1, 2, 3]).u32("x").is_err());
        assert!(Decoder::new(&[5, 1, 2]).length_prefixed(100, "s").is_err());
        assert!(Decoder::new(&[5, 1, 2, 3, 4, 5]).length_prefixed(4, "s").is_err());
    }

    #[test]
    fn counts_must_fit_the_bytes_left() {
        let mut d = Decoder::new(&[0u8; 20]);
        d.u32("count").unwrap();
        assert_eq!(d.count(4, 4, "items").unwrap(), 4);
        assert_eq!(d.count(0, 4, "items").unwrap(), 0);
        assert!(d.count(5, 4, "items").unwrap_err().contains("items 5 cannot fit"));
        assert!(d.count(u64::MAX, 1, "items").is_err());
        assert!(d.count(u64::MAX / 2, 8, "items").is_err(), "the product must not overflow");
        assert_eq!(d.count(16, 0, "items").unwrap(), 16, "a zero-size item counts as one byte");
        assert!(d.count(17, 0, "items").is_err());
    }

    #[test]
    fn trailing_crc_detects_any_flip() {
        let mut b = b"hello world".to_vec();
        let c = crc(&b);
        put_u32(&mut b, c);
        assert_eq!(check_trailing_crc(&b).unwrap(), b"hello world");
        for i in 0..b.len() * 8 {
            let mut x = b.clone();
            x[i / 8] ^= 1 << (i % 8);
            assert!(check_trailing_crc(&x).is_err(), "flip of bit {i} not detected");
        }
    }
}
