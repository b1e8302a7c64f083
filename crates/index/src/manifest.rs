//! The manifest: which runs make up the index and the durable sequence
//! number, rewritten whole on every flush and merge, and the `CURRENT`
//! file that names the committed manifest.
//!
//! Commit protocol (see docs/format.md, "Manifest"): write
//! `MANIFEST-<gen>` as a new file and sync it; write `CURRENT.tmp` naming
//! generation `gen` and sync it; sync the directory, so the names of the
//! manifest and of every run created before it are durable; rename
//! `CURRENT.tmp` over `CURRENT` and sync the directory again. The rename is
//! the commit point. Only then are the previous
//! manifest and the runs it alone referenced removed.
//!
//! Open reads `CURRENT` and the manifest it names; either failing a check
//! is corruption, reported by name, never a reason to fall back silently.
//! Any other manifest found is an uncommitted (possibly torn) or a stale
//! one, and is removed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use larder_io::{read_exact_at, write_all_at, OpenOptions, Storage};

use crate::codec::{check_trailing_crc, crc, put_bytes, put_u16, put_u32, put_u64, Decoder};
use crate::error::{IndexError, Result};
use crate::run::{RunMeta, MAX_LEVEL};
use crate::MAX_KEY_BYTES;

/// The first 8 bytes of every manifest.
pub(crate) const MANIFEST_MAGIC: [u8; 8] = *b"LRDRMANF";
/// The manifest format version this build writes and the newest it reads.
pub(crate) const MANIFEST_FORMAT_VERSION: u32 = 1;
/// Incompatible feature bits this build understands (none yet).
pub(crate) const MANIFEST_KNOWN_INCOMPAT: u64 = 0;
/// Upper bound on a manifest's size, so a corrupt length cannot make open
/// allocate without limit.
const MAX_MANIFEST_BYTES: u64 = 1 << 30;
/// The fewest bytes a run takes in a manifest (fixed fields and two empty
/// keys), so a corrupt run count is refused before it sizes anything.
const MIN_RUN_ENTRY_BYTES: usize = 8 + 4 + 8 + 8 + 8 + 4 + 8 + 1 + 1;

/// What a manifest holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ManifestState {
    pub generation: u64,
    /// Every batch up to this sequence number, and none above it, is in the runs.
    pub durable_seq: u64,
    /// Run ids below this were handed out; ids are never reused.
    pub next_run_id: u64,
    /// Names of the merge operators whose operands the runs may hold.
    pub operator_names: Vec<String>,
    /// Newest first.
    pub runs: Vec<RunMeta>,
}

pub(crate) fn manifest_file_name(generation: u64) -> String {
    format!("MANIFEST-{generation:016x}")
}

pub(crate) fn parse_manifest_file_name(name: &str) -> Option<u64> {
    crate::run::parse_lower_hex16(name.strip_prefix("MANIFEST-")?)
}

/// The file naming the committed manifest.
pub(crate) const CURRENT_FILE: &str = "CURRENT";
/// Where the next `CURRENT` is written before the rename commits it.
pub(crate) const CURRENT_TMP_FILE: &str = "CURRENT.tmp";
/// The first 8 bytes of `CURRENT`.
pub(crate) const CURRENT_MAGIC: [u8; 8] = *b"LRDRCURR";
/// Size of `CURRENT`: magic, version u32, generation u64, crc32c u32.
const CURRENT_BYTES: usize = 24;

fn encode_current(generation: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(CURRENT_BYTES);
    out.extend_from_slice(&CURRENT_MAGIC);
    put_u32(&mut out, MANIFEST_FORMAT_VERSION);
    put_u64(&mut out, generation);
    let c = crc(&out);
    put_u32(&mut out, c);
    out
}

/// The generation `CURRENT` names.
pub(crate) fn decode_current(bytes: &[u8], path: &Path) -> Result<u64> {
    let bad = |what: String| IndexError::corrupt(path, 0, what);
    // The checksum (the file's last 4 bytes, in every version) first: a
    // damaged file is corruption, never "bad magic" or a newer version.
    check_trailing_crc(bytes).map_err(bad)?;
    let mut d = Decoder::new(bytes);
    if d.bytes(8, "magic").map_err(bad)? != CURRENT_MAGIC {
        return Err(bad("bad magic: not a larder CURRENT file".into()));
    }
    let version = d.u32("version").map_err(bad)?;
    check_version(version, path)?;
    if bytes.len() != CURRENT_BYTES {
        return Err(bad(format!("CURRENT is {} bytes, expected {CURRENT_BYTES}", bytes.len())));
    }
    d.u64("generation").map_err(bad)
}

/// Refuses versions this build cannot read: 0 was never written, and a
/// newer one has a layout this build does not know.
fn check_version(version: u32, path: &Path) -> Result<()> {
    if version == 0 {
        return Err(IndexError::corrupt(path, 8, "format version 0 was never written"));
    }
    if version > MANIFEST_FORMAT_VERSION {
        return Err(IndexError::NewerVersion { path: path.into(), found: version, supported: MANIFEST_FORMAT_VERSION });
    }
    Ok(())
}

impl ManifestState {
    /// Encodes the manifest; refuses one too large for its length field.
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        put_u64(&mut body, 0); // compat features
        put_u64(&mut body, 0); // incompat features
        put_u64(&mut body, self.generation);
        put_u64(&mut body, self.durable_seq);
        put_u64(&mut body, self.next_run_id);
        put_u16(&mut body, self.operator_names.len() as u16);
        for n in &self.operator_names {
            put_bytes(&mut body, n.as_bytes());
        }
        put_u32(&mut body, self.runs.len() as u32);
        for r in &self.runs {
            put_u64(&mut body, r.id);
            put_u32(&mut body, r.level);
            put_u64(&mut body, r.seq_min);
            put_u64(&mut body, r.seq_max);
            put_u64(&mut body, r.entry_count);
            put_u32(&mut body, r.tombstone_count);
            put_u64(&mut body, r.file_size);
            put_bytes(&mut body, &r.min_key);
            put_bytes(&mut body, &r.max_key);
        }
        if body.len() as u64 + 20 > MAX_MANIFEST_BYTES {
            return Err(IndexError::TooLarge { what: "manifest", len: body.len() as u64, limit: MAX_MANIFEST_BYTES });
        }
        let mut out = Vec::with_capacity(body.len() + 20);
        out.extend_from_slice(&MANIFEST_MAGIC);
        put_u32(&mut out, MANIFEST_FORMAT_VERSION);
        put_u32(&mut out, body.len() as u32);
        out.extend_from_slice(&body);
        let c = crc(&out);
        put_u32(&mut out, c);
        Ok(out)
    }

    /// Decodes and checks a manifest. The checksum (the file's last 4
    /// bytes, over everything before them, in every version) is checked
    /// first, so damage is corruption, never "bad magic" or a newer
    /// version; then magic, version, length and feature flags.
    pub(crate) fn decode(bytes: &[u8], path: &Path) -> Result<ManifestState> {
        let bad = |what: String| IndexError::corrupt(path, 0, what);
        check_trailing_crc(bytes).map_err(bad)?;
        let mut d = Decoder::new(bytes);
        let magic = d.bytes(8, "magic").map_err(bad)?;
        if magic != MANIFEST_MAGIC {
            return Err(bad("bad magic: not a larder manifest".into()));
        }
        let version = d.u32("version").map_err(bad)?;
        check_version(version, path)?;
        let body_len = d.u32("body length").map_err(bad)? as usize;
        if bytes.len() != 16 + body_len + 4 {
            return Err(bad(format!("manifest is {} bytes, its header says {}", bytes.len(), 16 + body_len + 4)));
        }
        let _compat = d.u64("compat features").map_err(bad)?;
        let incompat = d.u64("incompat features").map_err(bad)?;
        if incompat & !MANIFEST_KNOWN_INCOMPAT != 0 {
            return Err(IndexError::UnknownFeature { path: path.into(), flags: incompat & !MANIFEST_KNOWN_INCOMPAT });
        }
        let generation = d.u64("generation").map_err(bad)?;
        let durable_seq = d.u64("durable seq").map_err(bad)?;
        let next_run_id = d.u64("next run id").map_err(bad)?;
        let n_ops = d.u16("operator count").map_err(bad)?;
        // Each name is at least its one-byte length.
        let n_ops = d.count(n_ops.into(), 1, "operator count").map_err(bad)?;
        let mut operator_names = Vec::with_capacity(n_ops);
        let mut seen_names = HashSet::with_capacity(n_ops);
        for _ in 0..n_ops {
            let n = d.length_prefixed(255, "operator name").map_err(bad)?;
            if !seen_names.insert(n) {
                return Err(bad("an operator name is listed twice".into()));
            }
            operator_names.push(String::from_utf8(n.to_vec()).map_err(|_| bad("operator name is not UTF-8".into()))?);
        }
        let n_runs = d.u32("run count").map_err(bad)?;
        let n_runs = d.count(n_runs.into(), MIN_RUN_ENTRY_BYTES, "run count").map_err(bad)?;
        let mut runs: Vec<RunMeta> = Vec::with_capacity(n_runs);
        let mut seen_ids = HashSet::with_capacity(n_runs);
        for i in 0..n_runs {
            let r = RunMeta {
                id: d.u64("run id").map_err(bad)?,
                level: d.u32("run level").map_err(bad)?,
                seq_min: d.u64("run seq min").map_err(bad)?,
                seq_max: d.u64("run seq max").map_err(bad)?,
                entry_count: d.u64("run entry count").map_err(bad)?,
                tombstone_count: d.u32("run tombstone count").map_err(bad)?,
                file_size: d.u64("run file size").map_err(bad)?,
                min_key: d.length_prefixed(MAX_KEY_BYTES, "run min key").map_err(bad)?.to_vec(),
                max_key: d.length_prefixed(MAX_KEY_BYTES, "run max key").map_err(bad)?.to_vec(),
            };
            if r.id >= next_run_id || r.seq_min > r.seq_max || r.seq_max > durable_seq {
                return Err(bad(format!("run {i} (id {}) has inconsistent ids or sequence numbers", r.id)));
            }
            if r.level > MAX_LEVEL {
                return Err(bad(format!(
                    "run {i} (id {}) is at level {}, above the last ({MAX_LEVEL})",
                    r.id, r.level
                )));
            }
            if !seen_ids.insert(r.id) {
                return Err(bad(format!("run id {} is listed twice", r.id)));
            }
            if let Some(prev) = runs.last() {
                if r.seq_max >= prev.seq_min || r.level < prev.level {
                    return Err(bad(format!("run {i} (id {}) is out of order", r.id)));
                }
            }
            runs.push(r);
        }
        if d.remaining() != 4 {
            return Err(bad(format!("{} unexpected bytes before the checksum", d.remaining().saturating_sub(4))));
        }
        Ok(ManifestState { generation, durable_seq, next_run_id, operator_names, runs })
    }
}

/// Writes `state` as a new manifest and commits it: when this returns, the
/// manifest (and every file created in `dir` before it) is durable and
/// `CURRENT` names it. Returns the manifest's path.
pub(crate) fn commit_manifest(storage: &dyn Storage, dir: &Path, state: &ManifestState) -> Result<PathBuf> {
    let path = dir.join(manifest_file_name(state.generation));
    let bytes = state.encode()?;
    let file = storage.open(&path, OpenOptions::CREATE_NEW)?;
    write_all_at(&*file, &bytes, 0)?;
    file.sync_data()?;
    let tmp = dir.join(CURRENT_TMP_FILE);
    match storage.remove_file(&tmp) {
        Err(e) if !e.is_not_found() => return Err(e.into()),
        _ => {}
    }
    let current = storage.open(&tmp, OpenOptions::CREATE_NEW)?;
    write_all_at(&*current, &encode_current(state.generation), 0)?;
    current.sync_data()?;
    // A directory orders nothing until it is synced: without this sync the
    // rename below could reach the disk while the manifest's name, or a
    // run's created before it, did not.
    storage.sync_dir(dir)?;
    // IMPORTANT: the rename made durable by the directory sync is the commit.
    storage.rename(&tmp, &dir.join(CURRENT_FILE))?;
    storage.sync_dir(dir)?;
    Ok(path)
}

/// The committed manifest and the other manifest files found (to remove).
pub(crate) struct Loaded {
    pub state: ManifestState,
    pub path: PathBuf,
    pub stale: Vec<PathBuf>,
}

/// Reads `CURRENT` and the manifest it names. None if there is no
/// `CURRENT` (a new index, or one whose first commit did not finish).
pub(crate) fn load_manifest(storage: &dyn Storage, dir: &Path, names: &[String]) -> Result<Option<Loaded>> {
    let current_path = dir.join(CURRENT_FILE);
    let mut stale: Vec<PathBuf> = names.iter().filter(|n| *n == CURRENT_TMP_FILE).map(|n| dir.join(n)).collect();
    if !names.iter().any(|n| n == CURRENT_FILE) {
        return Ok(None);
    }
    let generation = decode_current(&read_file(storage, &current_path, CURRENT_BYTES as u64)?, &current_path)?;
    let path = dir.join(manifest_file_name(generation));
    let state = ManifestState::decode(&read_file(storage, &path, MAX_MANIFEST_BYTES)?, &path)?;
    if state.generation != generation {
        return Err(IndexError::corrupt(
            &path,
            0,
            format!("holds generation {}, CURRENT names {generation}", state.generation),
        ));
    }
    stale.extend(
        names.iter().filter(|n| parse_manifest_file_name(n).is_some_and(|g| g != generation)).map(|n| dir.join(n)),
    );
    Ok(Some(Loaded { state, path, stale }))
}

fn read_file(storage: &dyn Storage, path: &Path, limit: u64) -> Result<Vec<u8>> {
    let file = storage.open(path, OpenOptions::READ)?;
    let len = file.len()?;
    if len > limit {
        return Err(IndexError::corrupt(path, 0, format!("{len} bytes is implausibly large (limit {limit})")));
    }
    let mut buf = vec![0u8; len as usize];
    read_exact_at(&*file, &mut buf, 0)?;
    Ok(buf)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample() -> ManifestState {
        ManifestState {
            generation: 7,
            durable_seq: 100,
            next_run_id: 9,
            operator_names: vec!["larder.counter.i64".into()],
            runs: vec![
                RunMeta {
                    id: 8,
                    level: 0,
                    seq_min: 51,
                    seq_max: 100,
                    entry_count: 3,
                    tombstone_count: 1,
                    file_size: 500,
                    min_key: b"a".to_vec(),
                    max_key: b"z".to_vec(),
                },
                RunMeta {
                    id: 3,
                    level: 1,
                    seq_min: 1,
                    seq_max: 50,
                    entry_count: 9,
                    tombstone_count: 0,
                    file_size: 900,
                    min_key: vec![],
                    max_key: b"q".to_vec(),
                },
            ],
        }
    }

    /// A large manifest: many operators and runs, the most a duplicate
    /// check has to look through.
    fn large(operators: usize, runs: u64) -> ManifestState {
        ManifestState {
            generation: 1,
            durable_seq: runs,
            next_run_id: runs + 1,
            operator_names: (0..operators).map(|i| format!("op{i}")).collect(),
            runs: (0..runs)
                .map(|i| RunMeta {
                    id: runs - i,
                    level: 0,
                    seq_min: runs - i,
                    seq_max: runs - i,
                    entry_count: 1,
                    tombstone_count: 0,
                    file_size: 100,
                    min_key: vec![],
                    max_key: vec![],
                })
                .collect(),
        }
    }

    #[test]
    fn duplicate_checks_take_linear_time() {
        // 65,535 operators and 200,000 runs: a pairwise check makes about
        // 2.1 and 20 billion comparisons (tens of seconds), a set 265,535
        // lookups (a fraction of a second, 0.2-0.5 s at load 15). The bound
        // sits far from both, so a loaded machine does not fail a linear
        // decoder and a quadratic one cannot pass.
        let s = large(u16::MAX as usize, 200_000);
        let bytes = s.encode().unwrap();
        let started = std::time::Instant::now();
        assert_eq!(ManifestState::decode(&bytes, Path::new("m")).unwrap(), s);
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(8), "decoding took {took:?}");

        let mut twice = large(3, 3);
        twice.operator_names[2] = "op0".into();
        let e = ManifestState::decode(&twice.encode().unwrap(), Path::new("m")).unwrap_err();
        assert!(e.to_string().contains("listed twice"), "{e}");
        let mut twice = large(0, 3);
        twice.runs[2].id = twice.runs[0].id;
        let e = ManifestState::decode(&twice.encode().unwrap(), Path::new("m")).unwrap_err();
        assert!(e.to_string().contains("listed twice"), "{e}");
    }

    #[test]
    fn round_trips() {
        let s = sample();
        assert_eq!(ManifestState::decode(&s.encode().unwrap(), Path::new("m")).unwrap(), s);
    }

    #[test]
    fn any_flip_or_truncation_is_refused() {
        let b = sample().encode().unwrap();
        for bit in 0..b.len() * 8 {
            let mut x = b.clone();
            x[bit / 8] ^= 1 << (bit % 8);
            assert!(ManifestState::decode(&x, Path::new("m")).is_err(), "bit {bit}");
        }
        for len in 0..b.len() {
            assert!(ManifestState::decode(&b[..len], Path::new("m")).is_err());
        }
    }

    #[test]
    fn newer_version_is_named() {
        let reseal = |b: &mut Vec<u8>| {
            let n = b.len();
            let c = crc(&b[..n - 4]);
            b[n - 4..].copy_from_slice(&c.to_le_bytes());
        };
        let mut b = sample().encode().unwrap();
        b[8] = 2;
        // Without a matching checksum a changed version is damage.
        assert!(matches!(ManifestState::decode(&b, Path::new("m")), Err(IndexError::Corrupt { .. })));
        reseal(&mut b);
        let e = ManifestState::decode(&b, Path::new("dir/MANIFEST-7")).unwrap_err();
        assert!(matches!(e, IndexError::NewerVersion { found: 2, .. }), "{e}");
        assert!(e.to_string().contains("dir/MANIFEST-7"));
        b[8] = 0;
        reseal(&mut b);
        assert!(matches!(ManifestState::decode(&b, Path::new("m")), Err(IndexError::Corrupt { .. })));
    }

    #[test]
    fn current_round_trips_and_refuses_flips() {
        let b = encode_current(42);
        assert_eq!(decode_current(&b, Path::new("CURRENT")).unwrap(), 42);
        for bit in 0..b.len() * 8 {
            let mut x = b.clone();
            x[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_current(&x, Path::new("CURRENT")).is_err(), "bit {bit}");
        }
    }

    #[test]
    fn names_are_strict_lower_hex() {
        assert_eq!(parse_manifest_file_name("MANIFEST-000000000000002a"), Some(42));
        assert_eq!(parse_manifest_file_name("MANIFEST-000000000000002A"), None);
        assert_eq!(parse_manifest_file_name("MANIFEST-+00000000000002a"), None);
        assert_eq!(parse_manifest_file_name("MANIFEST-2a"), None);
    }
}
