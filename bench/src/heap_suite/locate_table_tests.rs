//! The locate table (`larder_locate::table`) on the suite's own trees: it
//! answers every query as a scan of the list does.

use larder_locate::table;

use super::paths::{self, base_name};

/// The table of `paths` in one buffer (a test's stand-in for the heap object).
fn built(paths: &[String]) -> Vec<u8> {
    let table::Table { mut head, data } = table::build(paths).expect("build");
    head.extend_from_slice(&data);
    head
}

/// The paths whose last component is `name`, by a scan.
fn scan(paths: &[String], name: &str) -> Vec<String> {
    paths.iter().filter(|p| base_name(p) == name).cloned().collect()
}

fn found(t: &[u8], name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let n = table::search(t, name.as_bytes(), |p| out.push(String::from_utf8_lossy(p).into_owned())).expect("search");
    assert_eq!(n as usize, out.len());
    out
}

#[test]
fn a_table_answers_as_a_scan_of_its_list() {
    for (entries, seed) in [(0u64, 1u64), (1, 2), (31, 3), (32, 4), (33, 5), (1000, 6), (20_000, 7)] {
        let tree = paths::tree(entries, seed);
        let t = &built(&tree);
        for name in paths::queries(&tree, 60, seed) {
            assert_eq!(found(t, &name), scan(&tree, &name), "{entries} entries: {name}");
        }
        // Every path is found by its own name.
        for p in tree.iter().step_by(97) {
            assert!(found(t, base_name(p)).contains(p), "{p}");
        }
    }
}
