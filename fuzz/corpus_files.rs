//! The committed seed corpora under `fuzz/corpus/<target>/`, for the crates'
//! stable replay tests (each includes this file with `#[path]`): writing
//! generated seeds, deriving damaged ones, and replaying a corpus.
//!
//! Generated seeds are named `valid-*` (the decoder must accept them) and
//! `near-*` (a valid seed with one damage the decoder must refuse); other
//! files, such as inputs a fuzzer added, must only not panic.
#![allow(dead_code, clippy::unwrap_used)]

use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// A decoder's fuzz entry point: whether it accepted the input.
pub type Decode = fn(&[u8]) -> bool;

/// A target's name, entry point and valid seeds.
pub type Target = (&'static str, Decode, Vec<Vec<u8>>);

/// Largest seed written: libFuzzer starts best from small inputs.
pub const MAX_SEED_BYTES: usize = 64 << 10;

/// `fuzz/corpus/<target>`.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target)
}

pub fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        write!(s, "{x:02x}").unwrap();
    }
    s
}

/// Calls `decode`; a panic fails the test with the input in hex.
pub fn check(target: &str, decode: Decode, data: &[u8], what: &str) -> bool {
    match catch_unwind(AssertUnwindSafe(|| decode(data))) {
        Ok(accepted) => accepted,
        Err(_) => panic!("{target} panicked on {what}: {}", hex(data)),
    }
}

/// Damaged copies of the valid seeds that `decode` refuses, named by the
/// damage: the last byte dropped, a bit flipped at the start, middle and
/// end, a byte appended.
pub fn near_seeds(valid: &[Vec<u8>], decode: Decode) -> Vec<(String, Vec<u8>)> {
    let mut near = Vec::new();
    for (i, v) in valid.iter().enumerate().filter(|(_, v)| !v.is_empty()) {
        let flip = |at: usize| {
            let mut x = v.clone();
            x[at] ^= 0x10;
            x
        };
        let mut longer = v.clone();
        longer.push(0);
        let damaged = [
            ("truncated", v[..v.len() - 1].to_vec()),
            ("first-byte-flipped", flip(0)),
            ("middle-byte-flipped", flip(v.len() / 2)),
            ("last-byte-flipped", flip(v.len() - 1)),
            ("byte-appended", longer),
        ];
        for (what, x) in damaged {
            if !decode(&x) && !near.iter().any(|(_, y)| *y == x) {
                near.push((format!("{i:02}-{what}"), x));
            }
        }
    }
    near
}

/// Replaces the generated seeds of `target` with `valid` and `near`,
/// checking first that `decode` accepts every valid one and refuses every
/// near one.
pub fn write_corpus(target: &str, decode: Decode, valid: &[Vec<u8>], near: &[(String, Vec<u8>)]) {
    let dir = corpus_dir(target);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("valid-") || name.starts_with("near-") {
            std::fs::remove_file(&path).unwrap();
        }
    }
    for (i, v) in valid.iter().enumerate() {
        assert!(v.len() <= MAX_SEED_BYTES, "{target}: valid seed {i} is {} bytes", v.len());
        assert!(check(target, decode, v, "a valid seed"), "{target}: valid seed {i} ({} bytes) was refused", v.len());
        std::fs::write(dir.join(format!("valid-{i:02}")), v).unwrap();
    }
    for (name, v) in near {
        assert!(!check(target, decode, v, "a near seed"), "{target}: near seed {name} was accepted");
        std::fs::write(dir.join(format!("near-{name}")), v).unwrap();
    }
    println!("{target}: {} valid, {} near seeds in {}", valid.len(), near.len(), dir.display());
}

/// Replays every file of `target`'s corpus: `valid-*` accepted, `near-*`
/// refused, none panics. Requires at least one valid and one near seed;
/// returns the number of files.
pub fn replay_corpus(target: &str, decode: Decode) -> usize {
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{target}: no seed corpus at {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let (mut valid, mut near) = (0, 0);
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let accepted = check(target, decode, &std::fs::read(path).unwrap(), &name);
        if name.starts_with("valid-") {
            assert!(accepted, "{target}: seed {name} was refused");
            valid += 1;
        } else if name.starts_with("near-") {
            assert!(!accepted, "{target}: seed {name} was accepted");
            near += 1;
        }
    }
    assert!(valid >= 1 && near >= 1, "{target}: {valid} valid and {near} near seeds in {}", dir.display());
    files.len()
}
