//! Which runs to merge: a pure policy over the current runs, so it can be
//! tested on hand-built versions.
//!
//! Tiered merging in the manner of the COLA: when a level holds
//! `merge_fanout` runs, its oldest `merge_fanout` runs are merged into one
//! run of the next level. Each byte is rewritten about once per level, so
//! write amplification grows with log_fanout(data / memtable) rather than
//! with fanout times levels as in leveled merging.
//!
//! Small runs below large ones do not fill a level: the oldest runs of a
//! level that are each at most a [`SMALL_RUN_RATIO`]th of its largest run
//! (fewer than `merge_fanout` of them) do not count toward the fanout, and
//! ride along in the merge that the runs above them set off. They are the
//! runs flushed before a bulk load (a bulk create of 4M files: the store's
//! creation and the `mkdir`, a few KiB, under ingested runs of 99 MiB
//! each): counted as full runs they set off a merge rewriting two large
//! runs two ingests early, beside the next chunk's create. A level holding
//! `max_runs` runs (the index's `l0_slowdown_runs`) merges its oldest
//! `merge_fanout` whatever their sizes, so writes never wait on a merge
//! this rule holds back.

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
    /// A merge at rest ([`choose_at_rest`]): run at the lowest CPU
    /// priority, behind readers and other work.
    pub at_rest: bool,
}

/// A run at most this fraction of its level's largest run is small (see
/// the module doc). Runs of one level written the same way differ by far
/// less (a memtable flush from the next by its entries' sizes, a merge's
/// output from the next by what the merge dropped).
pub(crate) const SMALL_RUN_RATIO: u64 = 16;

/// Picks the next merge, skipping runs already being merged; a level of
/// `max_runs` runs or more merges its oldest `fanout` runs whatever their
/// sizes.
pub(crate) fn choose(runs: &[RunMeta], busy: &HashSet<u64>, fanout: usize, max_runs: usize) -> Option<Task> {
    let max_level = runs.iter().map(|r| r.level).max()?;
    for level in 0..=max_level {
        let positions: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].level == level).collect();
        if positions.len() < fanout {
            continue;
        }
        let riders = small_oldest(runs, &positions, fanout);
        let take = if positions.len() - riders >= fanout {
            fanout + riders
        } else if positions.len() >= max_runs {
            fanout
        } else {
            continue;
        };
        let chosen = &positions[positions.len() - take..];
        if chosen.iter().any(|&i| busy.contains(&runs[i].id)) {
            continue;
        }
        let last = chosen[chosen.len() - 1];
        return Some(Task {
            inputs: chosen.iter().map(|&i| runs[i].id).collect(),
            output_level: level + 1,
            bottom: last == runs.len() - 1,
            at_rest: false,
        });
    }
    None
}

/// How many of a level's oldest runs (`positions`, newest first) are small
/// beside its largest, one after another from the oldest: 0 when
/// `fanout` or more are (they make a merge of their own).
fn small_oldest(runs: &[RunMeta], positions: &[usize], fanout: usize) -> usize {
    let largest = positions.iter().map(|&i| runs[i].file_size).max().unwrap_or(0);
    let small =
        positions.iter().rev().take_while(|&&i| runs[i].file_size.saturating_mul(SMALL_RUN_RATIO) <= largest).count();
    if small >= fanout {
        0
    } else {
        small
    }
}

/// Merges at rest rewrite at most this many bytes per byte flushed or
/// ingested since the index opened (over its life, not per round).
pub(crate) const REST_MERGE_BYTES_PER_WRITTEN: u64 = 2;

/// A merge at rest (see `Options::merge_at_rest`): the runs of the first
/// level holding two or more, none of them busy, into one run of the same
/// level, if their bytes fit in `budget` (what
/// [`REST_MERGE_BYTES_PER_WRITTEN`] leaves). Levels rather than the whole
/// store, so the small upper levels are done first: a scan soon positions
/// fewer runs.
pub(crate) fn choose_at_rest(runs: &[RunMeta], busy: &HashSet<u64>, budget: u64) -> Option<Task> {
    let max_level = runs.iter().map(|r| r.level).max()?;
    (0..=max_level).find_map(|level| {
        let positions: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].level == level).collect();
        if positions.len() < 2 || positions.iter().any(|&i| busy.contains(&runs[i].id)) {
            return None;
        }
        if positions.iter().map(|&i| runs[i].file_size).sum::<u64>() > budget {
            return None;
        }
        Some(Task {
            inputs: positions.iter().map(|&i| runs[i].id).collect(),
            output_level: level,
            bottom: positions.last() == Some(&(runs.len() - 1)),
            at_rest: true,
        })
    })
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
        at_rest: false,
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
    fn a_merge_at_rest_takes_one_level_into_one_run_of_that_level() {
        let runs =
            vec![sized(6, 0, 10), sized(5, 0, 10), sized(4, 1, 40), sized(3, 1, 40), sized(2, 1, 40), sized(1, 2, 1)];
        let none = HashSet::new();
        assert_eq!(
            choose_at_rest(&runs, &none, u64::MAX),
            Some(Task { inputs: vec![6, 5], output_level: 0, bottom: false, at_rest: true })
        );
        // A level with a busy run waits; the next is taken meanwhile.
        let busy: HashSet<u64> = [5].into_iter().collect();
        assert_eq!(
            choose_at_rest(&runs, &busy, u64::MAX),
            Some(Task { inputs: vec![4, 3, 2], output_level: 1, bottom: false, at_rest: true })
        );
        // The last level's merge drops tombstones; a level of one run is done.
        let bottom = vec![sized(3, 0, 10), sized(2, 1, 40), sized(1, 1, 40)];
        assert_eq!(
            choose_at_rest(&bottom, &none, u64::MAX),
            Some(Task { inputs: vec![2, 1], output_level: 1, bottom: true, at_rest: true })
        );
        assert_eq!(choose_at_rest(&bottom[..2], &none, u64::MAX), None);
        assert_eq!(choose_at_rest(&[], &none, u64::MAX), None);
        // A level that does not fit the budget waits; a smaller one goes.
        assert_eq!(choose_at_rest(&runs, &none, 19), None);
        assert_eq!(choose_at_rest(&runs, &none, 20).expect("a task").inputs, [6, 5]);
        assert_eq!(choose_at_rest(&runs, &busy, 119), None);
        assert_eq!(choose_at_rest(&runs, &busy, 120).expect("a task").inputs, [4, 3, 2]);
    }

    #[test]
    fn merges_oldest_runs_of_the_first_full_level() {
        let runs = vec![run(9, 0, 90), run(8, 0, 80), run(7, 0, 70), run(6, 0, 60), run(5, 0, 50), run(1, 1, 10)];
        let t = choose(&runs, &HashSet::new(), 4, 8).expect("a task");
        assert_eq!(t, Task { inputs: vec![8, 7, 6, 5], output_level: 1, bottom: false, at_rest: false });
        assert_eq!(choose(&runs[..3], &HashSet::new(), 4, 8), None);
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
        let t = choose(&runs, &busy, 4, 8).expect("a task");
        assert_eq!(t, Task { inputs: vec![4, 3, 2, 1], output_level: 2, bottom: true, at_rest: false });
    }

    fn sized(id: u64, level: u32, file_size: u64) -> RunMeta {
        RunMeta { file_size, ..run(id, level, id * 10) }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn small_oldest_runs_wait_for_fanout_large_ones_and_ride_along() {
        // A bulk create: the store's creation and the mkdir flushed (2 and
        // 3 KiB), then ingested runs of 99 MiB, newest first.
        let mut runs = vec![sized(4, 0, 99 * MIB), sized(3, 0, 99 * MIB), sized(2, 0, 3072), sized(1, 0, 2048)];
        assert_eq!(choose(&runs, &HashSet::new(), 4, 8), None);
        runs.insert(0, sized(5, 0, 99 * MIB));
        assert_eq!(choose(&runs, &HashSet::new(), 4, 8), None);
        runs.insert(0, sized(6, 0, 99 * MIB));
        let t = choose(&runs, &HashSet::new(), 4, 8).expect("a task");
        assert_eq!(t, Task { inputs: vec![6, 5, 4, 3, 2, 1], output_level: 1, bottom: true, at_rest: false });
        // Busy inputs are skipped as before.
        let busy: HashSet<u64> = [1].into_iter().collect();
        assert_eq!(choose(&runs, &busy, 4, 8), None);
    }

    #[test]
    fn runs_of_like_sizes_and_small_runs_above_a_large_one_merge_at_the_fanout() {
        // Flushed memtables differ in size, but by less than the ratio.
        let like = vec![sized(4, 0, 40 * MIB), sized(3, 0, 64 * MIB), sized(2, 0, 5 * MIB), sized(1, 0, 60 * MIB)];
        assert_eq!(choose(&like, &HashSet::new(), 4, 8).expect("a task").inputs, [4, 3, 2, 1]);
        // Small runs newer than a large one count: only the oldest ride.
        let large_oldest = vec![sized(4, 0, 1024), sized(3, 0, 1024), sized(2, 0, 1024), sized(1, 0, 99 * MIB)];
        assert_eq!(choose(&large_oldest, &HashSet::new(), 4, 8).expect("a task").inputs, [4, 3, 2, 1]);
        // As many small oldest runs as the fanout merge on their own.
        let small_tail =
            vec![sized(5, 0, 99 * MIB), sized(4, 0, 10), sized(3, 0, 10), sized(2, 0, 10), sized(1, 0, 10)];
        assert_eq!(choose(&small_tail, &HashSet::new(), 4, 8).expect("a task").inputs, [4, 3, 2, 1]);
    }

    #[test]
    fn the_ratio_is_inclusive_and_measured_against_the_largest() {
        let at = |oldest: u64| vec![sized(4, 0, 1600), sized(3, 0, 3200), sized(2, 0, 1600), sized(1, 0, oldest)];
        assert_eq!(choose(&at(200), &HashSet::new(), 4, 8), None);
        assert_eq!(choose(&at(201), &HashSet::new(), 4, 8).expect("a task").inputs, [4, 3, 2, 1]);
        // With fanout 2 one small run at most rides.
        let pair = vec![sized(2, 0, 1600), sized(1, 0, 100)];
        assert_eq!(choose(&pair, &HashSet::new(), 2, 8), None);
    }

    #[test]
    fn a_level_of_max_runs_merges_its_oldest_fanout_whatever_their_sizes() {
        let runs = vec![sized(4, 0, 99 * MIB), sized(3, 0, 99 * MIB), sized(2, 0, 10), sized(1, 0, 10)];
        // Fanout 2: the two small runs are a merge of their own.
        assert_eq!(choose(&runs, &HashSet::new(), 2, 8).expect("a task").inputs, [2, 1]);
        assert_eq!(choose(&runs, &HashSet::new(), 3, 8), None);
        assert_eq!(choose(&runs, &HashSet::new(), 3, 4).expect("a task").inputs, [3, 2, 1]);
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
        let t = choose(&runs, &HashSet::new(), 4, 8).expect("a task");
        assert_eq!(t, Task { inputs: vec![4, 3, 2, 1], output_level: 2, bottom: true, at_rest: false });
    }

    #[test]
    fn choose_all_takes_everything() {
        let runs = vec![run(2, 0, 20), run(1, 3, 10)];
        assert_eq!(choose_all(&runs), Some(Task { inputs: vec![2, 1], output_level: 3, bottom: true, at_rest: false }));
        assert_eq!(choose_all(&runs[..1]), None);
    }
}
