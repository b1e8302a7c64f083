//! Which runs to merge: a pure policy over the current runs, so it can be
//! tested on hand-built versions.
//!
//! Tiered merging in the manner of the COLA: when a level holds
//! `merge_fanout` runs, its oldest `merge_fanout` runs are merged into one
//! run of the next level. Each byte is rewritten about once per level, so
//! write amplification grows with log_fanout(data / memtable) rather than
//! with fanout times levels as in leveled merging.
//!
//! A small run does not fill a level: when the oldest of those runs is at
//! most a [`SMALL_RUN_RATIO`]th of the smallest of the others, the level
//! waits for one run more and the small one rides along in that merge.
//! This is the run an ingest's forced flush leaves below large ingested
//! runs (a bulk create of 4M files: the `mkdir`'s few hundred bytes under
//! three runs of 99 MiB each): counted as a full run it set off a merge
//! rewriting the three large runs one ingest early, beside the next
//! chunk's create. It delays a merge by at most one run, so a level never
//! holds more than `merge_fanout + 1` runs for want of a merge.

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

/// A level's oldest run at most this fraction of the size of every other
/// run of its merge does not count toward the level's fanout (see the
/// module doc). Runs of one level written the same way differ by far less
/// (a memtable flush from the next by its entries' sizes, a merge's output
/// from the next by what the merge dropped).
pub(crate) const SMALL_RUN_RATIO: u64 = 16;

/// Picks the next merge, skipping runs already being merged.
pub(crate) fn choose(runs: &[RunMeta], busy: &HashSet<u64>, fanout: usize) -> Option<Task> {
    let max_level = runs.iter().map(|r| r.level).max()?;
    for level in 0..=max_level {
        let positions: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].level == level).collect();
        if positions.len() < fanout {
            continue;
        }
        let mut take = fanout;
        if oldest_is_small(runs, &positions[positions.len() - fanout..]) {
            if positions.len() == fanout {
                continue;
            }
            take += 1;
        }
        let chosen = &positions[positions.len() - take..];
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

/// Whether the oldest (last) of `window`'s runs is small beside every
/// other one: at most a [`SMALL_RUN_RATIO`]th of the smallest of them.
fn oldest_is_small(runs: &[RunMeta], window: &[usize]) -> bool {
    let Some((&oldest, others)) = window.split_last() else {
        return false;
    };
    let Some(smallest_other) = others.iter().map(|&i| runs[i].file_size).min() else {
        return false;
    };
    runs[oldest].file_size.saturating_mul(SMALL_RUN_RATIO) <= smallest_other
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

    fn sized(id: u64, level: u32, file_size: u64) -> RunMeta {
        RunMeta { file_size, ..run(id, level, id * 10) }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_small_oldest_run_waits_for_one_run_more_and_rides_along() {
        // A bulk create: the mkdir's flushed run (2 KiB), then ingested
        // runs of 99 MiB, newest first.
        let mut runs = vec![sized(4, 0, 99 * MIB), sized(3, 0, 99 * MIB), sized(2, 0, 99 * MIB), sized(1, 0, 2048)];
        assert_eq!(choose(&runs, &HashSet::new(), 4), None);
        runs.insert(0, sized(5, 0, 99 * MIB));
        let t = choose(&runs, &HashSet::new(), 4).expect("a task");
        assert_eq!(t, Task { inputs: vec![5, 4, 3, 2, 1], output_level: 1, bottom: true });
        // Busy inputs are skipped as before.
        let busy: HashSet<u64> = [1].into_iter().collect();
        assert_eq!(choose(&runs, &busy, 4), None);
    }

    #[test]
    fn runs_of_like_sizes_and_a_large_oldest_merge_at_the_fanout() {
        // Flushed memtables differ in size, but by less than the ratio.
        let like = vec![sized(4, 0, 40 * MIB), sized(3, 0, 64 * MIB), sized(2, 0, 5 * MIB), sized(1, 0, 60 * MIB)];
        let t = choose(&like, &HashSet::new(), 4).expect("a task");
        assert_eq!(t.inputs, [4, 3, 2, 1]);
        // Small runs newer than a large one: the large oldest counts.
        let large_oldest = vec![sized(4, 0, 1024), sized(3, 0, 1024), sized(2, 0, 1024), sized(1, 0, 99 * MIB)];
        assert_eq!(choose(&large_oldest, &HashSet::new(), 4).expect("a task").inputs, [4, 3, 2, 1]);
    }

    #[test]
    fn the_ratio_is_inclusive_and_measured_against_the_smallest_other() {
        let at = |oldest: u64| vec![sized(4, 0, 1600), sized(3, 0, 3200), sized(2, 0, 1600), sized(1, 0, oldest)];
        assert_eq!(choose(&at(100), &HashSet::new(), 4), None);
        assert_eq!(choose(&at(101), &HashSet::new(), 4).expect("a task").inputs, [4, 3, 2, 1]);
        // With fanout 2 the window is the oldest run and one other.
        let pair = vec![sized(2, 0, 1600), sized(1, 0, 100)];
        assert_eq!(choose(&pair, &HashSet::new(), 2), None);
    }

    #[test]
    fn a_waiting_level_does_not_hold_up_the_next() {
        let runs = vec![
            sized(9, 0, 99 * MIB),
            sized(8, 0, 99 * MIB),
            sized(7, 0, 99 * MIB),
            sized(6, 0, 10),
            sized(4, 1, MIB),
            sized(3, 1, MIB),
            sized(2, 1, MIB),
            sized(1, 1, MIB),
        ];
        let t = choose(&runs, &HashSet::new(), 4).expect("a task");
        assert_eq!(t, Task { inputs: vec![4, 3, 2, 1], output_level: 2, bottom: true });
    }

    #[test]
    fn choose_all_takes_everything() {
        let runs = vec![run(2, 0, 20), run(1, 3, 10)];
        assert_eq!(choose_all(&runs), Some(Task { inputs: vec![2, 1], output_level: 3, bottom: true }));
        assert_eq!(choose_all(&runs[..1]), None);
    }
}
