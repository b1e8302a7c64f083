//! `larder export STORE BUCKET[/PREFIX] DIRECTORY`: keys back into files,
//! each key's levels becoming directories, so `import` then `export` gives
//! the tree back.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::objects::copy;
use crate::store::{shown, Address};
use crate::target::{Listed, Target};
use crate::{progress, stats};

/// Options of `larder export`.
#[derive(clap::Args, Debug)]
pub(crate) struct ExportArgs {
    /// Store directory.
    store: PathBuf,
    /// BUCKET, or BUCKET/PREFIX for the keys starting with PREFIX.
    #[arg(value_name = "BUCKET[/PREFIX]")]
    source: String,
    /// Directory to write the files into (created if missing).
    directory: PathBuf,
    /// Replace files that exist already (default: refuse, naming the file).
    #[arg(long)]
    overwrite: bool,
}

/// `larder export`.
pub(crate) fn run(args: &ExportArgs) -> Result<()> {
    let addr = Address::parse(&args.source)?;
    let target = Target::open(&args.store)?;
    let ctx = || format!("listing {} in the store at {}", args.source, args.store.display());
    let entries: Vec<Listed> = target
        .scan_prefix(&addr.bucket, addr.key.as_bytes())
        .with_context(ctx)?
        .collect::<Result<_, _>>()
        .with_context(ctx)?;
    let total: u64 = entries.iter().map(|e| e.size).sum();
    fs::create_dir_all(&args.directory).with_context(|| format!("creating {}", args.directory.display()))?;

    let start = Instant::now();
    let pb = progress::bytes(total);
    let mut written = (0u64, 0u64);
    let mut vanished = 0u64;
    for (i, e) in entries.iter().enumerate() {
        let path = key_path(&args.directory, &e.key)?;
        match export_one(&target, &addr.bucket, e, &path, args.overwrite)? {
            Some(n) => written = (written.0 + 1, written.1 + n),
            None => {
                pb.suspend(|| eprintln!("skipped {}: deleted while exporting", shown(&e.key)));
                vanished += 1;
            }
        }
        pb.inc(e.size);
        pb.set_message(format!("{}/{} keys", i + 1, entries.len()));
    }
    pb.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "exported {} keys ({}) to {} in {secs:.2} s ({}){}",
        written.0,
        stats::bytes(written.1),
        args.directory.display(),
        stats::per_sec(written.1 as f64 / secs.max(1e-9)),
        if vanished > 0 { format!("; {vanished} keys were deleted meanwhile") } else { String::new() }
    );
    target.close(&args.store)
}

/// The file `key` becomes under `dir`. Keys never hold `.`, `..` or empty
/// levels (the KV layer refuses them), but a damaged store could: checked
/// here so no key can write outside `dir`.
fn key_path(dir: &Path, key: &[u8]) -> Result<PathBuf> {
    let mut path = dir.to_path_buf();
    for part in key.split(|&b| b == b'/') {
        if part.is_empty() || part == b"." || part == b".." {
            bail!("key {} has a level that cannot be a file name; not exported", shown(key));
        }
        path.push(OsStr::from_bytes(part));
    }
    Ok(path)
}

/// Writes the value of `e` into `path`; `None` if the key is gone.
fn export_one(target: &Target, bucket: &str, e: &Listed, path: &Path, overwrite: bool) -> Result<Option<u64>> {
    let Some((mut r, _)) = target.reader(bucket, &e.key).with_context(|| format!("reading {}", shown(&e.key)))? else {
        return Ok(None);
    };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create(overwrite)
        .truncate(overwrite)
        .create_new(!overwrite)
        .open(path)
        .with_context(|| {
            let hint = if path.exists() { " (it exists; --overwrite replaces it)" } else { "" };
            format!("creating {}{hint}", path.display())
        })?;
    let n = copy(&mut r, &mut f).with_context(|| format!("copying {} into {}", shown(&e.key), path.display()))?;
    Ok(Some(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_paths_inside_the_directory() {
        let dir = Path::new("/out");
        assert_eq!(key_path(dir, b"a/b c/d").ok(), Some(PathBuf::from("/out/a/b c/d")));
        for bad in [&b"../x"[..], b"a/../../x", b"a//b", b"/abs", b"a/."] {
            assert!(key_path(dir, bad).is_err(), "{bad:?} was accepted");
        }
    }
}
