//! `larder init STORE`: creates a store, its sizes fitted to the file
//! system it is on unless given.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use larder_io::Storage;
use larder_object::CreationOptions;

use crate::store;

/// Arguments of `larder init`.
#[derive(clap::Args, Debug)]
pub(crate) struct InitArgs {
    /// Store directory (created if missing).
    pub store: PathBuf,
    /// Largest size of a container file, a power of two of at least 1M
    /// (K, M, G, T: powers of 1024). Container files start small and grow
    /// up to it as data arrives. Default 1G.
    #[arg(long, value_parser = parse_size)]
    pub container_size: Option<u64>,
    /// Size of each intent-log segment file, a multiple of 4K of at least
    /// 64K. Default: a sixty-fourth of the file system's free space,
    /// rounded down to a power of two, between 4M and 64M.
    #[arg(long, value_parser = parse_size)]
    pub log_segment_size: Option<u64>,
}

/// Parses a byte count: digits with an optional K, M, G or T (powers of
/// 1024, optionally followed by `iB` or `B`), e.g. `64M`, `1GiB`, `4096`.
pub(crate) fn parse_size(arg: &str) -> std::result::Result<u64, String> {
    let digits = arg.trim().trim_end_matches("iB").trim_end_matches('B');
    let (number, shift) = match digits.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("`{arg}`: unknown unit `{c}`; use K, M, G or T")),
            };
            (&digits[..i], shift)
        }
        _ => (digits, 0),
    };
    let n: u64 = number.parse().map_err(|_| format!("`{arg}` is not a size like 4096, 64K, 64M or 1G"))?;
    n.checked_mul(1u64 << shift).ok_or_else(|| format!("`{arg}` is too large"))
}

/// The nearest existing directory at or above `dir`, whose file system
/// the store will be on.
fn existing_ancestor(dir: &Path) -> PathBuf {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    absolute.ancestors().find(|a| a.is_dir()).unwrap_or(Path::new("/")).to_path_buf()
}

/// Runs `larder init`.
pub(crate) fn run(args: &InitArgs) -> Result<()> {
    let on = existing_ancestor(&args.store);
    let available = larder_io::RealStorage::new()
        .available_bytes(&on)
        .with_context(|| format!("reading the free space of the file system holding {}", on.display()))?;
    let mut creation = CreationOptions::fitted_to(available);
    if let Some(bytes) = args.container_size {
        creation.container_bytes = bytes;
    }
    if let Some(bytes) = args.log_segment_size {
        creation.log_segment_bytes = bytes;
    }
    if let Err(e) = creation.validate() {
        bail!(
            "{e} (container_bytes is --container-size, log_segment_bytes is --log-segment-size); nothing was created"
        );
    }
    let kv = store::create(&args.store, creation)?;
    store::close(kv, &args.store)?;
    println!(
        "created a store at {} (containers up to {} MiB, log segments of {} MiB)",
        args.store.display(),
        creation.container_bytes >> 20,
        creation.log_segment_bytes as f64 / f64::from(1 << 20)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("2TB"), Ok(2 << 40));
        for bad in ["", "M", "12X", "1.5G", "-1", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
