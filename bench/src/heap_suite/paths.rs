//! The locate workload's data: the paths of a generated tree (a mix of
//! directories and files, as the paper's trees) and the names searched.
//! Both are functions of the seed, so every engine gets the same.

use crate::workload::mix64;

/// The root every generated path is under.
pub const ROOT: &str = "/tree";

const FILE_WORDS: [&str; 16] = [
    "report", "notes", "main", "index", "config", "data", "image", "backup", "draft", "letter", "table", "photo",
    "song", "build", "test", "readme",
];
const EXTENSIONS: [&str; 8] = ["txt", "c", "h", "rs", "jpg", "pdf", "md", "log"];
const DIR_WORDS: [&str; 8] = ["src", "docs", "home", "music", "work", "old", "lib", "share"];

/// The sorted, distinct paths of a tree of `entries` entries (directories
/// and files, the root not counted): breadth first, each directory gets 2 to
/// 16 children, one in five a directory. Names repeat across directories
/// (`report417.txt` may be in many), as file names do.
pub fn tree(entries: u64, seed: u64) -> Vec<String> {
    let mut paths: Vec<String> = Vec::with_capacity(entries as usize);
    let mut dirs: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    dirs.push_back(ROOT.to_string());
    let mut draw = 0u64;
    let mut next = || {
        draw += 1;
        mix64(seed ^ 0x7472_6565 ^ (draw << 8))
    };
    while (paths.len() as u64) < entries {
        let Some(parent) = dirs.pop_front() else { break };
        let children = 2 + next() % 15;
        for child in 0..children {
            if paths.len() as u64 >= entries {
                break;
            }
            let r = next();
            // The last directory in the queue always gets a subdirectory,
            // so the walk never runs out of directories.
            let is_dir = r % 5 == 0 || (child == 0 && dirs.is_empty());
            let path = if is_dir {
                format!("{parent}/{}{}", DIR_WORDS[(r >> 8) as usize % DIR_WORDS.len()], (r >> 16) % 100)
            } else {
                format!(
                    "{parent}/{}{}.{}",
                    FILE_WORDS[(r >> 8) as usize % FILE_WORDS.len()],
                    (r >> 16) % 1000,
                    EXTENSIONS[(r >> 32) as usize % EXTENSIONS.len()]
                )
            };
            if is_dir {
                dirs.push_back(path.clone());
            }
            paths.push(path);
        }
    }
    paths.sort_unstable();
    paths.dedup();
    paths
}

/// The last component of a path.
pub fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `count` names to search: even ones are names of paths in `paths`, odd ones
/// a name no path has.
pub fn queries(paths: &[String], count: u64, seed: u64) -> Vec<String> {
    (0..count)
        .map(|q| {
            if q % 2 == 0 && !paths.is_empty() {
                let i = mix64(seed ^ 0x0071_7565_7279 ^ q) % paths.len() as u64;
                base_name(&paths[i as usize]).to_string()
            } else {
                format!("absent{q}.none")
            }
        })
        .collect()
}

/// FNV-1a of a path: the checksum of a search is the sum over its matches,
/// so engines that find the same paths in any order agree.
pub fn path_checksum(path: &[u8]) -> u64 {
    path.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The matches and checksum of searching `names` in `paths` by a plain scan
    /// of the list: what every engine must answer.
    pub fn expected(paths: &[String], names: &[String]) -> (u64, u64) {
        let mut matches = 0u64;
        let mut checksum = 0u64;
        for name in names {
            for p in paths.iter().filter(|p| base_name(p) == name) {
                matches += 1;
                checksum = checksum.wrapping_add(path_checksum(p.as_bytes()));
            }
        }
        (matches, checksum)
    }

    #[test]
    fn a_tree_has_the_entries_asked_for_sorted_and_distinct() {
        for n in [100u64, 4000] {
            let t = tree(n, 42);
            assert!(t.len() as u64 <= n && t.len() as u64 > n * 9 / 10, "{n}: {}", t.len());
            assert!(t.windows(2).all(|w| w[0] < w[1]));
            assert!(t.iter().all(|p| p.starts_with("/tree/")));
        }
        assert_eq!(tree(500, 1), tree(500, 1));
        assert_ne!(tree(500, 1), tree(500, 2));
    }

    #[test]
    fn present_queries_match_and_absent_ones_do_not() {
        let t = tree(1000, 7);
        let q = queries(&t, 10, 7);
        for (i, name) in q.iter().enumerate() {
            let hits = t.iter().filter(|p| base_name(p) == name).count();
            assert_eq!(hits > 0, i % 2 == 0, "{name}");
        }
        let (matches, _) = expected(&t, &q);
        assert!(matches >= 5);
    }
}
