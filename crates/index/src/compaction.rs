//! Which runs to merge: a pure policy over the current runs, so it can be
//! tested on hand-built versions.
//!
//! Tiered merging in the manner of the COLA: when a level holds
//! `merge_fanout` runs, its oldest `merge_fanout` runs are merged into one
//! run of the next level. Each byte is rewritten about once per level, so
//! write amplification grows with log_fanout(data / memtable) rather than
//! with fanout times levels as in leveled merging.

use std::collections::HashSet;

use crate::run::RunMeta;

/// A merge to carry out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Task {
    /// Run ids to merge: contiguous in the version, newest first.
    pub inputs: Vec<u64>,
    pub output_level: u32,
    /// No run older than the inputs exists: tombstones can be dropped.
    pub bottom: bool,
}

/// Picks the next merge, skipping runs already being merged.
pub(crate) fn choose(runs: &[RunMeta], busy: &HashSet<u64>, fanout: usize) -> Option<Task> {
    let max_level = runs.iter().map(|r| r.level).max()?;
    for level in 0..=max_level {
        let positions: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].level == level).collect();
        if positions.len() < fanout {
            continue;
        }
        let chosen = &positions[positions.len() - fanout..];
        if chosen.iter().any(|&i| busy.contains(&runs[i].id)) {
            continue;
        }
        let last = chosen[chosen.len() - 1];
        return Some(Task {
            inputs: chosen.iter().map(|&i| runs[i].id).collect(),
            output_level: level + 1,
            bottom: last == runs.len() - 1,
        });
    }
    None
}

/// A merge of every run into one (for `compact_all`), or None when there is
/// at most one run.
pub(crate) fn choose_all(runs: &[RunMeta]) -> Option<Task> {
    if runs.len() < 2 {
        return None;
    }
    Some(Task {
        inputs: runs.iter().map(|r| r.id).collect(),
        output_level: runs.iter().map(|r| r.level).max().unwrap_or(0),
        bottom: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: u64, level: u32, seq: u64) -> RunMeta {
        RunMeta {
            id,
            level,
            seq_min: seq,
            seq_max: seq,
            entry_count: 1,
            tombstone_count: 0,
            file_size: 1,
            min_key: vec![],
            max_key: vec![],
        }
    }

    #[test]
    fn merges_oldest_runs_of_the_first_full_level() {
        let runs = vec![run(9, 0, 90), run(8, 0, 80), run(7, 0, 70), run(6, 0, 60), run(5, 0, 50), run(1, 1, 10)];
        let t = choose(&runs, &HashSet::new(), 4).expect("a task");
        assert_eq!(t, Task { inputs: vec![8, 7, 6, 5], output_level: 1, bottom: false });
        assert_eq!(choose(&runs[..3], &HashSet::new(), 4), None);
    }

    #[test]
    fn skips_busy_runs_and_marks_bottom() {
        let runs = vec![
            run(9, 0, 90),
            run(8, 0, 80),
            run(7, 0, 70),
            run(6, 0, 60),
            run(4, 1, 40),
            run(3, 1, 30),
            run(2, 1, 20),
            run(1, 1, 10),
        ];
        let busy: HashSet<u64> = [6].into_iter().collect();
        let t = choose(&runs, &busy, 4).expect("a task");
        assert_eq!(t, Task { inputs: vec![4, 3, 2, 1], output_level: 2, bottom: true });
    }

    #[test]
    fn choose_all_takes_everything() {
        let runs = vec![run(2, 0, 20), run(1, 3, 10)];
        assert_eq!(choose_all(&runs), Some(Task { inputs: vec![2, 1], output_level: 3, bottom: true }));
        assert_eq!(choose_all(&runs[..1]), None);
    }
}
