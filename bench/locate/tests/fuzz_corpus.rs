//! Replays the seed corpus of the `locate_table` fuzz target (fuzz/corpus):
//! each seed is a name length, a name and a table, as the target reads
//! them. Valid seeds (`valid-*`, tables as the program writes them) are
//! answered; damaged ones are answered or refused, never a panic.

#![allow(clippy::unwrap_used)]

use std::path::Path;

/// The fuzz target whose corpus this replays.
const TARGET: &str = "locate_table";

/// Splits a seed as the fuzz target does: (name, table).
fn split(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&len, rest) = data.split_first()?;
    let len = usize::from(len % 32).min(rest.len());
    Some(rest.split_at(len))
}

#[test]
fn locate_table_seeds_are_answered_or_refused() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(TARGET);
    let mut valid = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(&path).unwrap();
        let Some((wanted, table)) = split(&data) else { continue };
        let mut found = Vec::new();
        let result = larder_locate::table::search(table, wanted, |p| found.push(p.to_vec()));
        if name.starts_with("valid-") {
            valid += 1;
            let count = result.unwrap_or_else(|e| panic!("{name}: a valid table was refused: {e}"));
            assert_eq!(count as usize, found.len(), "{name}: the count and the paths differ");
            // Every path found ends with the name searched for.
            for p in &found {
                assert!(p.ends_with(wanted), "{name}: {p:?} does not end with {wanted:?}");
            }
        }
    }
    assert!(valid >= 3, "only {valid} valid seeds in {}", dir.display());
}
