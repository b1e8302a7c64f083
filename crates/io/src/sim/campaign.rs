//! Seeded crash campaigns: where and how each run of a deterministic
//! workload ends, for tests that run the workload once to count its calls
//! (the probe) and then again under each [`CrashRun`].

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{CrashMode, SimCounters, SimStorage};

/// How many runs of each kind [`crash_runs`] makes.
#[derive(Clone, Copy, Debug)]
pub struct CampaignShape {
    /// Crashes after a random write.
    pub at_writes: usize,
    /// Crashes after a random sync.
    pub at_syncs: usize,
    /// Crashes after a random namespace operation (a create, rename or
    /// remove not yet made durable by a directory sync).
    pub at_names: usize,
    /// Crashes after a random write, then again during the recovery.
    pub in_recovery: usize,
    /// One I/O failure of a random kind at a random call, then a crash.
    pub faults: usize,
}

/// One run of a campaign: the storage to run the workload on (crash or
/// fault armed), and how its image is taken afterwards.
pub struct CrashRun {
    /// The storage, armed.
    pub sim: SimStorage,
    what: String,
    mode: CrashMode,
    /// A crash after this many writes of the first recovery, and the mode
    /// of that second crash.
    recovery: Option<(u64, CrashMode)>,
}

impl CrashRun {
    /// The image to check once the workload ran on [`CrashRun::sim`], and
    /// what happened, for a failure message. A run that crashes during
    /// recovery calls `recover` (which should open the store, and may
    /// fail) on the crashed image armed to crash again.
    pub fn image(self, recover: impl FnOnce(&SimStorage)) -> (SimStorage, String) {
        let mut image = self.sim.crash_with(self.mode);
        let mut what = format!("{} ({:?})", self.what, self.mode);
        if let Some((k, second)) = self.recovery {
            // Recovery writes too (replay's flush, a checkpoint, freeing
            // orphans): crash among them and recover again.
            image.crash_after_writes(k);
            recover(&image);
            image = image.crash_with(second);
            what = format!("{what}, then after write {k} of the recovery ({second:?})");
        }
        (image, what)
    }
}

/// The runs of `seed`'s campaign, given the `probe` run's counters. Every
/// run's storage has unordered directory operations
/// ([`SimStorage::set_unordered_dir_ops`]), so a random crash may keep any
/// subset of the names not yet synced.
pub fn crash_runs(seed: u64, probe: &SimCounters, shape: CampaignShape) -> Vec<CrashRun> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xC0FF_EE00);
    let mode = |rng: &mut StdRng| {
        [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending][rng.gen_range(0..3)]
    };
    let (writes, syncs, names) = (probe.writes.max(1), probe.syncs.max(1), probe.namespace_ops.max(1));
    let kinds = std::iter::repeat_n(0, shape.at_writes)
        .chain(std::iter::repeat_n(1, shape.at_syncs))
        .chain(std::iter::repeat_n(2, shape.in_recovery))
        .chain(std::iter::repeat_n(3, shape.faults))
        .chain(std::iter::repeat_n(4, shape.at_names));
    kinds
        .enumerate()
        .map(|(c, kind)| {
            let sim = SimStorage::new(seed.wrapping_mul(1000) + c as u64);
            sim.set_unordered_dir_ops(true);
            let what = match kind {
                1 => {
                    let k = rng.gen_range(0..syncs);
                    sim.crash_after_syncs(k);
                    format!("seed {seed}: crash after sync {k} of {syncs}")
                }
                3 => format!("seed {seed}: {}, then a crash", sim.fail_one_at_random(probe, rng.gen())),
                4 => {
                    let k = rng.gen_range(1..=names);
                    sim.crash_after_namespace_ops(k);
                    format!("seed {seed}: crash after namespace op {k} of {names}")
                }
                _ => {
                    let k = rng.gen_range(0..writes);
                    sim.crash_after_writes(k);
                    format!("seed {seed}: crash after write {k} of {writes}")
                }
            };
            let recovery = (kind == 2).then(|| (rng.gen_range(0..30), mode(&mut rng)));
            CrashRun { sim, what, mode: mode(&mut rng), recovery }
        })
        .collect()
}

/// The seeds a campaign runs: `LARDER_CRASH_SEEDS` of them (else
/// `default`) from `LARDER_CRASH_SEED_BASE` (else 0), so CI runs a few and
/// a longer campaign is one variable away.
pub fn campaign_seeds(default: u64) -> std::ops::Range<u64> {
    let var = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let base = var("LARDER_CRASH_SEED_BASE", 0);
    base..base.saturating_add(var("LARDER_CRASH_SEEDS", default))
}

/// An exhaustive campaign: for each crash point `1..=count` (armed on a
/// fresh storage by `arm`, e.g. [`SimStorage::crash_after_writes`]) and
/// each [`CrashMode`], runs `workload` until the crash and hands its
/// outcome and the crashed image to `check`, with a description naming
/// `kind`, the point and the mode. Every storage has unordered directory
/// operations. A workload that finishes before its crash point fails the
/// campaign: `count` must come from a probe run of the same workload.
pub fn crash_at_every_point<T>(
    kind: &str,
    count: u64,
    arm: impl Fn(&SimStorage, u64),
    workload: impl Fn(&SimStorage) -> T,
    check: impl Fn(&SimStorage, T, &str),
) {
    for k in 1..=count {
        for (m, mode) in
            [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending].into_iter().enumerate()
        {
            let sim = SimStorage::new(k * 3 + m as u64);
            sim.set_unordered_dir_ops(true);
            arm(&sim, k);
            let outcome = workload(&sim);
            assert!(sim.is_crashed(), "{kind} {k}: the workload finished before the crash point");
            check(&sim.crash_with(mode), outcome, &format!("crash after {kind} {k} ({mode:?})"));
        }
    }
}
