//! The manifest: which runs make up the index and the durable sequence
//! number, rewritten whole on every flush and merge.
//!
//! Commit protocol (see docs/format.md, "Manifest"): write `MANIFEST-<gen>`
//! as a new file, sync it, sync the directory; only then remove the previous
//! manifest and the runs it alone referenced. Open takes the valid manifest
//! with the highest generation. A newer manifest that fails its checksum
//! was torn by a crash before its commit finished, so the previous one (and
//! every run it names) is still there.

use std::path::{Path, PathBuf};

use larder_io::{read_exact_at, write_all_at, OpenOptions, Storage};

use crate::codec::{check_trailing_crc, crc, put_bytes, put_u16, put_u32, put_u64, Decoder};
use crate::error::{IndexError, Result};
use crate::run::RunMeta;
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
    let hex = name.strip_prefix("MANIFEST-")?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok()).flatten()
}

impl ManifestState {
    pub(crate) fn encode(&self) -> Vec<u8> {
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
        let mut out = Vec::with_capacity(body.len() + 20);
        out.extend_from_slice(&MANIFEST_MAGIC);
        put_u32(&mut out, MANIFEST_FORMAT_VERSION);
        put_u32(&mut out, body.len() as u32);
        out.extend_from_slice(&body);
        let c = crc(&out);
        put_u32(&mut out, c);
        out
    }

    /// Decodes and checks a manifest. Version and feature checks come
    /// before the checksum so a newer format is reported as such.
    pub(crate) fn decode(bytes: &[u8], path: &Path) -> Result<ManifestState> {
        let bad = |what: String| IndexError::corrupt(path, 0, what);
        let mut d = Decoder::new(bytes);
        let magic = d.bytes(8, "magic").map_err(bad)?;
        if magic != MANIFEST_MAGIC {
            return Err(bad("bad magic: not a larder manifest".into()));
        }
        let version = d.u32("version").map_err(bad)?;
        if version > MANIFEST_FORMAT_VERSION {
            return Err(IndexError::NewerVersion {
                path: path.into(),
                found: version,
                supported: MANIFEST_FORMAT_VERSION,
            });
        }
        let body_len = d.u32("body length").map_err(bad)? as usize;
        if bytes.len() != 16 + body_len + 4 {
            return Err(bad(format!("manifest is {} bytes, its header says {}", bytes.len(), 16 + body_len + 4)));
        }
        check_trailing_crc(bytes).map_err(bad)?;
        let _compat = d.u64("compat features").map_err(bad)?;
        let incompat = d.u64("incompat features").map_err(bad)?;
        if incompat & !MANIFEST_KNOWN_INCOMPAT != 0 {
            return Err(IndexError::UnknownFeature { path: path.into(), flags: incompat & !MANIFEST_KNOWN_INCOMPAT });
        }
        let generation = d.u64("generation").map_err(bad)?;
        let durable_seq = d.u64("durable seq").map_err(bad)?;
        let next_run_id = d.u64("next run id").map_err(bad)?;
        let n_ops = d.u16("operator count").map_err(bad)?;
        let mut operator_names = Vec::new();
        for _ in 0..n_ops {
            let n = d.length_prefixed(255, "operator name").map_err(bad)?;
            operator_names.push(String::from_utf8(n.to_vec()).map_err(|_| bad("operator name is not UTF-8".into()))?);
        }
        let n_runs = d.u32("run count").map_err(bad)?;
        let mut runs: Vec<RunMeta> = Vec::new();
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

/// Writes `state` as a new manifest and makes it durable (file and
/// directory synced). Returns its path.
pub(crate) fn write_manifest(storage: &dyn Storage, dir: &Path, state: &ManifestState) -> Result<PathBuf> {
    let path = dir.join(manifest_file_name(state.generation));
    let bytes = state.encode();
    let file = storage.open(&path, OpenOptions::CREATE_NEW)?;
    write_all_at(&*file, &bytes, 0)?;
    file.sync_data()?;
    // IMPORTANT: the manifest counts as committed only once its name is durable.
    storage.sync_dir(dir)?;
    Ok(path)
}

/// The manifest to open and the other manifest files found (to remove).
pub(crate) struct Loaded {
    pub state: ManifestState,
    pub path: PathBuf,
    pub stale: Vec<PathBuf>,
}

/// Finds the valid manifest with the highest generation. None if the
/// directory holds no manifest at all.
pub(crate) fn load_manifest(storage: &dyn Storage, dir: &Path, names: &[String]) -> Result<Option<Loaded>> {
    let mut gens: Vec<u64> = names.iter().filter_map(|n| parse_manifest_file_name(n)).collect();
    gens.sort_unstable_by(|a, b| b.cmp(a));
    let mut first_error = None;
    for (i, g) in gens.iter().enumerate() {
        let path = dir.join(manifest_file_name(*g));
        match read_manifest(storage, &path) {
            Ok(state) if state.generation == *g => {
                let stale = gens
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, g)| dir.join(manifest_file_name(*g)))
                    .collect();
                return Ok(Some(Loaded { state, path, stale }));
            }
            Ok(state) => {
                first_error.get_or_insert(IndexError::corrupt(
                    &path,
                    0,
                    format!("holds generation {}", state.generation),
                ));
            }
            // A newer format is not a torn write: refuse rather than fall back.
            Err(e @ (IndexError::NewerVersion { .. } | IndexError::UnknownFeature { .. })) => return Err(e),
            Err(e @ IndexError::Corrupt { .. }) => {
                tracing::warn!(error = %e, "skipping a manifest that fails its checks (torn by a crash?)");
                first_error.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

fn read_manifest(storage: &dyn Storage, path: &Path) -> Result<ManifestState> {
    let file = storage.open(path, OpenOptions::READ)?;
    let len = file.len()?;
    if len > MAX_MANIFEST_BYTES {
        return Err(IndexError::corrupt(path, 0, format!("manifest of {len} bytes is implausibly large")));
    }
    let mut buf = vec![0u8; len as usize];
    read_exact_at(&*file, &mut buf, 0)?;
    ManifestState::decode(&buf, path)
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

    #[test]
    fn round_trips() {
        let s = sample();
        assert_eq!(ManifestState::decode(&s.encode(), Path::new("m")).unwrap(), s);
    }

    #[test]
    fn any_flip_or_truncation_is_refused() {
        let b = sample().encode();
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
        let mut b = sample().encode();
        b[8] = 2;
        let e = ManifestState::decode(&b, Path::new("dir/MANIFEST-7")).unwrap_err();
        assert!(matches!(e, IndexError::NewerVersion { found: 2, .. }), "{e}");
        assert!(e.to_string().contains("dir/MANIFEST-7"));
    }
}
