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
//! budget twice as long, so spinning comes back once answers are quick
//! again.

/// Every this many waits, a spinner tries twice its budget (plus
/// [`PROBE_SPINS`]), so a budget cut to nothing can grow again.
pub const PROBE_EVERY: u32 = 16;

/// Checks a probing wait adds to twice the budget.
pub const PROBE_SPINS: u32 = 32;

/// Checks added to twice the checks an answer took, for the next budget.
const MARGIN_SPINS: u32 = 8;

/// The adaptive spin budget of one waiting side (one ring, one worker).
#[derive(Debug, Clone)]
pub struct Spinner {
    budget: u32,
    max: u32,
    adaptive: bool,
    waits: u32,
}

impl Spinner {
    /// A spinner that starts with `max` checks and adapts between 0 and
    /// `max`.
    pub fn adaptive(max: u32) -> Spinner {
        Spinner { budget: max, max, adaptive: true, waits: 0 }
    }

    /// A spinner that always spins `checks` checks (tests, and callers
    /// that know their peer has a CPU of its own).
    pub fn fixed(checks: u32) -> Spinner {
        Spinner { budget: checks, max: checks, adaptive: false, waits: 0 }
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
        self.waits = self.waits.wrapping_add(1);
        if self.waits.is_multiple_of(PROBE_EVERY) {
            self.budget.saturating_mul(2).saturating_add(PROBE_SPINS).min(self.max)
        } else {
            self.budget
        }
    }

    /// Ends a wait that spun `checks` checks: `arrived` if what it waited
    /// for came while spinning, false if it is going to sleep.
    pub fn finish(&mut self, checks: u32, arrived: bool) {
        if !self.adaptive {
            return;
        }
        if arrived {
            let wanted = checks.saturating_mul(2).saturating_add(MARGIN_SPINS).min(self.max);
            self.budget = self.budget.max(wanted);
        } else {
            self.budget /= 2;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_spins_its_checks_and_never_learns() {
        let mut spinner = Spinner::fixed(5);
        let mut checks = 0;
        assert!(!spinner.spin(|| {
            checks += 1;
            false
        }));
        assert_eq!(checks, 5);
        assert_eq!(spinner.budget(), 5);
        assert!(spinner.spin(|| true));
        assert_eq!(spinner.budget(), 5);
    }

    #[test]
    fn failed_spins_halve_the_budget_down_to_nothing() {
        let mut spinner = Spinner::adaptive(1024);
        let mut budgets = Vec::new();
        for _ in 0..12 {
            spinner.spin(|| false);
            budgets.push(spinner.budget());
        }
        // Probes (every 16th wait) do not come within 12 waits here.
        assert_eq!(budgets[..4], [512, 256, 128, 64]);
        assert_eq!(spinner.budget(), 0);
        // With no budget, a wait checks nothing before sleeping.
        let mut checks = 0;
        assert!(!spinner.spin(|| {
            checks += 1;
            false
        }));
        assert_eq!(checks, 0);
    }

    #[test]
    fn probes_grow_a_budget_back_when_answers_are_quick() {
        let mut spinner = Spinner::adaptive(1024);
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

    #[test]
    fn budget_never_passes_its_max() {
        let mut spinner = Spinner::adaptive(100);
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
}
