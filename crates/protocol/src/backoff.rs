//! How long a side that waits for its peer spins before it sleeps on a
//! futex.
//!
//! Spinning pays only when the peer runs on another CPU at the same time:
//! then the answer arrives within a microsecond or so and a sleep and a
//! wake-up (a few microseconds each) are saved. On a machine with more
//! runnable threads than CPUs a spinner keeps others off its CPU, often
//! the very peer it waits for, and every round trip pays the whole spin
//! (measured on 2 busy CPUs, load 12: a round trip to the do-nothing
//! server took 100-300 µs with 2,000 spins on each side, 6-8 µs with
//! none). A [`Spinner`] therefore learns from its own waits: it spins
//! about twice as long as recent answers took to arrive while spinning,
//! halves its budget each time the spin ran out, and now and then tries a
//! longer spin (a probe), so spinning comes back once answers are quick
//! again. A probe that finds nothing makes the next one twice as long and
//! twice as far off (up to [`LONGEST_PROBE`]), so probes cost about two
//! checks per wait whatever their length, and an answer that takes N
//! checks is found again within about N waits (with probes of one length,
//! a peer whose answers took longer than that, such as a server whose own
//! work is a microsecond or two, was never found by a probe once the
//! budget had run out, and every round trip paid a sleep and a wake-up
//! for good). While no thread waits for a CPU (the runnable threads,
//! sampled from /proc/loadavg every few milliseconds, are no more than
//! the CPUs)
//! a spin takes a CPU from no one, and every wait spins its whole maximum:
//! on an idle machine both sides otherwise learnt to sleep at once (a
//! spin from a small budget cannot outlast the peer's wake-up, 40-50 µs
//! for an idle vCPU), and every round trip then paid two wake-ups.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Waits between a spinner's probes while they find answers: every this
/// many waits it tries twice its budget plus a probe's checks, so a budget
/// cut to nothing can grow again. A probe that found nothing doubles both
/// the next probe's checks and the waits before it.
pub const PROBE_EVERY: u32 = 16;

/// Checks the first probe (and every probe after one that found its
/// answer) adds to twice the budget.
pub const PROBE_SPINS: u32 = 32;

/// Most checks a probe adds to twice the budget, however many probes
/// found nothing: about 9 µs of checks on the VMs measured, several times
/// a served read's answer (2-3 µs). Longer answers are not worth spinning
/// for once the budget ran out, and probes at most this long come at most
/// 128 waits apart, so a worker whose clients were away a long time spins
/// for their requests again within 128 of them.
pub const LONGEST_PROBE: u32 = 8 * PROBE_SPINS;

/// Checks added to twice the checks an answer took, for the next budget.
const MARGIN_SPINS: u32 = 8;

/// How often [`cpus_to_spare`] reads /proc/loadavg again, in nanoseconds.
const SPARE_SAMPLE_NANOS: u64 = 5_000_000;

/// The adaptive spin budget of one waiting side (one ring, one worker).
#[derive(Debug, Clone)]
pub struct Spinner {
    budget: u32,
    max: u32,
    adaptive: bool,
    /// Checks the next probe adds to twice the budget.
    probe: u32,
    /// Waits left before the next probe.
    until_probe: u32,
    /// The wait under way is a probe.
    probing: bool,
    /// Whether a spin would take a CPU from no one now.
    spare_cpus: fn() -> bool,
    /// The wait under way spins its maximum because CPUs were to spare:
    /// running out then says nothing about the machine.
    spare_wait: bool,
}

impl Spinner {
    /// A spinner that starts with `max` checks and adapts between 0 and
    /// `max`, spinning `max` whenever [`cpus_to_spare`].
    pub fn adaptive(max: u32) -> Spinner {
        Spinner::adaptive_with(max, cpus_to_spare)
    }

    /// As [`Spinner::adaptive`], with `spare_cpus` saying when CPUs are to
    /// spare (tests give a fixed answer).
    pub fn adaptive_with(max: u32, spare_cpus: fn() -> bool) -> Spinner {
        Spinner {
            budget: max,
            max,
            adaptive: true,
            probe: PROBE_SPINS,
            until_probe: PROBE_EVERY,
            probing: false,
            spare_cpus,
            spare_wait: false,
        }
    }

    /// A spinner that always spins `checks` checks (tests, and callers
    /// that know their peer has a CPU of its own).
    pub fn fixed(checks: u32) -> Spinner {
        Spinner {
            budget: checks,
            max: checks,
            adaptive: false,
            probe: PROBE_SPINS,
            until_probe: PROBE_EVERY,
            probing: false,
            spare_cpus: || false,
            spare_wait: false,
        }
    }

    /// The checks the current budget allows (what the next wait spins,
    /// unless it probes).
    pub fn budget(&self) -> u32 {
        self.budget
    }

    /// Starts a wait: the most checks to spin before sleeping this time.
    pub fn start(&mut self) -> u32 {
        if !self.adaptive {
            return self.budget;
        }
        self.probing = false;
        self.spare_wait = (self.spare_cpus)();
        if self.spare_wait {
            return self.max;
        }
        self.until_probe = self.until_probe.saturating_sub(1);
        if self.until_probe == 0 {
            // The next probe's distance, unless this one's outcome sets it.
            self.until_probe = probe_distance(self.probe);
            self.probing = true;
            self.budget.saturating_mul(2).saturating_add(self.probe).min(self.max)
        } else {
            self.budget
        }
    }

    /// Schedules the next probe: `probe` checks, after as many waits as
    /// keep the probes' cost at [`PROBE_SPINS`] checks per
    /// [`PROBE_EVERY`] waits.
    fn next_probe(&mut self, probe: u32) {
        self.probe = probe.clamp(PROBE_SPINS, LONGEST_PROBE);
        self.until_probe = probe_distance(self.probe);
    }

    /// Ends a wait that spun `checks` checks: `arrived` if what it waited
    /// for came while spinning, false if it is going to sleep.
    pub fn finish(&mut self, checks: u32, arrived: bool) {
        if !self.adaptive {
            return;
        }
        let probed = std::mem::take(&mut self.probing);
        if arrived {
            let wanted = checks.saturating_mul(2).saturating_add(MARGIN_SPINS).min(self.max);
            self.budget = self.budget.max(wanted);
            if probed {
                self.next_probe(PROBE_SPINS);
            }
        } else if !self.spare_wait {
            self.budget /= 2;
            if probed {
                self.next_probe(self.probe.saturating_mul(2));
            }
        }
    }

    /// Spins until `ready` holds or the budget runs out; returns whether
    /// it holds (and learns from the outcome).
    pub fn spin(&mut self, mut ready: impl FnMut() -> bool) -> bool {
        let limit = self.start();
        for checks in 0..limit {
            if ready() {
                self.finish(checks, true);
                return true;
            }
            std::hint::spin_loop();
        }
        self.finish(limit, false);
        false
    }
}

/// Waits from one probe of `probe` checks to the next: [`PROBE_EVERY`]
/// for [`PROBE_SPINS`] checks, and as many more as the probe is longer.
fn probe_distance(probe: u32) -> u32 {
    PROBE_EVERY.saturating_mul((probe / PROBE_SPINS).max(1))
}

/// Whether no thread waits for a CPU: the runnable threads (the fourth
/// field of /proc/loadavg, this one included) are no more than the CPUs
/// this process may use. Sampled at most every few milliseconds for the
/// whole process; false where /proc cannot say.
pub fn cpus_to_spare() -> bool {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    // Nanoseconds since EPOCH of the last sample, plus one (0: none yet).
    static SAMPLED_AT: AtomicU64 = AtomicU64::new(0);
    static SPARE: AtomicBool = AtomicBool::new(false);
    let now = u64::try_from(EPOCH.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX - 1) + 1;
    let at = SAMPLED_AT.load(Ordering::Relaxed);
    if (at == 0 || now.saturating_sub(at) >= SPARE_SAMPLE_NANOS)
        && SAMPLED_AT.compare_exchange(at, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    {
        SPARE.store(sample_spare_cpus().unwrap_or(false), Ordering::Relaxed);
    }
    SPARE.load(Ordering::Relaxed)
}

/// One reading of /proc/loadavg against the CPUs this process may use.
fn sample_spare_cpus() -> Option<bool> {
    // Kept open and read from its start each time: opening and closing it
    // was most of a sample's cost (a leased webserver client spent about
    // 4% of its CPU time sampling).
    static LOADAVG: OnceLock<Option<std::fs::File>> = OnceLock::new();
    let file = LOADAVG.get_or_init(|| std::fs::File::open("/proc/loadavg").ok()).as_ref()?;
    let mut buf = [0u8; 128];
    let n = std::os::unix::fs::FileExt::read_at(file, &mut buf, 0).ok()?;
    let running = runnable_threads(std::str::from_utf8(&buf[..n]).ok()?)?;
    Some(running <= usable_cpus()?)
}

/// The CPUs this process may use, read once: std's answer reads the
/// affinity mask and parses cgroup files (/proc/self/mountinfo among
/// them), several times the cost of the /proc/loadavg read it is compared
/// with (a leased webserver client spent about 4% of its CPU time there),
/// and a running process's CPUs seldom change.
fn usable_cpus() -> Option<u64> {
    static CPUS: OnceLock<Option<u64>> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().ok().and_then(|n| u64::try_from(n.get()).ok()))
}

/// The runnable threads in /proc/loadavg's text ("0.24 1.29 4.00 2/345
/// 12345": 2).
fn runnable_threads(loadavg: &str) -> Option<u64> {
    loadavg.split_whitespace().nth(3)?.split('/').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins `spinner` once for something that never comes; the checks it
    /// made before giving up.
    fn fruitless_spin(spinner: &mut Spinner) -> u32 {
        let mut checks = 0;
        assert!(!spinner.spin(|| {
            checks += 1;
            false
        }));
        checks
    }

    #[test]
    fn fixed_spins_its_checks_and_never_learns() {
        let mut spinner = Spinner::fixed(5);
        assert_eq!(fruitless_spin(&mut spinner), 5);
        assert_eq!(spinner.budget(), 5);
        assert!(spinner.spin(|| true));
        assert_eq!(spinner.budget(), 5);
    }

    #[test]
    fn failed_spins_halve_the_budget_down_to_nothing() {
        let mut spinner = Spinner::adaptive_with(1024, || false);
        let mut budgets = Vec::new();
        for _ in 0..12 {
            spinner.spin(|| false);
            budgets.push(spinner.budget());
        }
        // Probes (every 16th wait) do not come within 12 waits here.
        assert_eq!(budgets[..4], [512, 256, 128, 64]);
        assert_eq!(spinner.budget(), 0);
        // With no budget, a wait checks nothing before sleeping.
        assert_eq!(fruitless_spin(&mut spinner), 0);
    }

    #[test]
    fn probes_grow_a_budget_back_when_answers_are_quick() {
        let mut spinner = Spinner::adaptive_with(1024, || false);
        for _ in 0..15 {
            spinner.spin(|| false);
        }
        assert_eq!(spinner.budget(), 0);
        // The answer comes after 20 checks from now on: only the probes
        // (every 16th wait) can see it, and each success raises the budget
        // to twice what the answer took plus a margin.
        let mut grown_after = None;
        for wait in 0..64 {
            let mut checks = 0;
            spinner.spin(|| {
                checks += 1;
                checks > 20
            });
            if spinner.budget() >= 48 {
                grown_after = Some(wait);
                break;
            }
        }
        assert!(grown_after.is_some_and(|w| w < 16), "budget {}", spinner.budget());
        // Once grown, every wait sees the answer and keeps the budget.
        for _ in 0..40 {
            let mut checks = 0;
            assert!(spinner.spin(|| {
                checks += 1;
                checks > 20
            }));
        }
        assert!(spinner.budget() >= 48);
    }

    /// Waits until `spinner`'s budget reaches `budget` while every answer
    /// comes after `needs` checks, at most `waits` of them; the wait it
    /// reached it in.
    fn waits_to_grow(spinner: &mut Spinner, needs: u32, budget: u32, waits: u32) -> Option<u32> {
        (0..waits).find(|_| {
            let mut checks = 0;
            spinner.spin(|| {
                checks += 1;
                checks > needs
            });
            spinner.budget() >= budget
        })
    }

    #[test]
    fn longer_probes_find_slow_answers_once_the_budget_ran_out() {
        let mut spinner = Spinner::adaptive_with(2_000, || false);
        for _ in 0..15 {
            spinner.spin(|| false);
        }
        assert_eq!(spinner.budget(), 0);
        // Answers now take 150 checks, more than a first probe spins: the
        // probes that miss grow (32, 64, 128, 256 checks) until one sees
        // an answer, within about as many waits as the answer takes checks.
        let grown = waits_to_grow(&mut spinner, 150, 300, 400);
        assert!(grown.is_some_and(|w| w < 300), "budget {} after 400 waits", spinner.budget());
        // And then every wait sees its answer.
        assert_eq!(waits_to_grow(&mut spinner, 150, 300, 1), Some(0));
        // A successful probe makes the next one short and near again: a
        // budget run out once more comes back at once for quick answers.
        for _ in 0..12 {
            spinner.spin(|| false);
        }
        assert_eq!(spinner.budget(), 0);
        assert!(waits_to_grow(&mut spinner, 20, 48, 64).is_some_and(|w| w < 32));
    }

    #[test]
    fn probes_that_find_nothing_cost_about_two_checks_per_wait() {
        let mut spinner = Spinner::adaptive_with(1_024, || false);
        let waits = 20_000u64;
        let checks: u64 = (0..waits).map(|_| u64::from(fruitless_spin(&mut spinner))).sum();
        // The first ten waits spin the halving budget (1,023 checks at most
        // together), the probes after them two checks per wait.
        assert!(checks <= 1_024 + 2 * waits + 1_024, "{checks} checks in {waits} waits");
        // The probes grew to their longest, and no further.
        let mut longest = 0;
        for _ in 0..2_000 {
            longest = longest.max(fruitless_spin(&mut spinner));
        }
        assert_eq!(longest, LONGEST_PROBE);
        // A spinner whose probes found nothing for long finds quick answers
        // again within the longest probe's distance.
        let back = waits_to_grow(&mut spinner, 20, 48, 200);
        assert!(back.is_some_and(|w| w <= PROBE_EVERY * LONGEST_PROBE / PROBE_SPINS), "{back:?}");
    }

    #[test]
    fn budget_never_passes_its_max() {
        let mut spinner = Spinner::adaptive_with(100, || false);
        for _ in 0..50 {
            let mut checks = 0;
            spinner.spin(|| {
                checks += 1;
                checks > 90
            });
            assert!(spinner.budget() <= 100);
            assert!(spinner.start() <= 100);
        }
    }

    #[test]
    fn with_cpus_to_spare_every_wait_spins_its_maximum_and_running_out_costs_nothing() {
        let mut spinner = Spinner::adaptive_with(64, || true);
        for _ in 0..40 {
            assert_eq!(fruitless_spin(&mut spinner), 64);
        }
        assert_eq!(spinner.budget(), 64);
    }

    #[test]
    fn runnable_threads_are_the_fourth_field() {
        assert_eq!(runnable_threads("0.24 1.29 4.00 2/345 12345\n"), Some(2));
        assert_eq!(runnable_threads("0.24 1.29 4.00"), None);
        assert_eq!(runnable_threads("0.24 1.29 4.00 x/345 1"), None);
        // This process runs the test: on Linux there is at least one.
        assert!(sample_spare_cpus().is_some());
    }

    #[test]
    fn the_kept_loadavg_file_reads_again_from_its_start() {
        // Each sample reads the file kept open by the first from offset 0.
        for _ in 0..3 {
            assert!(sample_spare_cpus().is_some());
        }
    }
}
