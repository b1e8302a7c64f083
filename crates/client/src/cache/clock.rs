//! The clock leases are checked against. A cached open, read or stat
//! checks a lease several times, and CLOCK_MONOTONIC_COARSE (the time of
//! the last tick) is a few times cheaper to read than CLOCK_MONOTONIC,
//! which `Instant` reads; it is the same clock, behind by a tick, or by
//! up to five when the CPU that keeps time stalls (the kernel then takes
//! the duty over: a virtual CPU its host does not run). Adding eight of
//! its ticks makes the reading no earlier than the precise clock, so a
//! lease is never taken as valid past its term: it only ends that much
//! earlier for the client (a term is a second by default, a tick 1-10 ms).

use std::sync::OnceLock;

use rustix::time::{clock_getres, clock_gettime, ClockId, Timespec};

/// Ticks of the coarse clock added to its reading.
const MARGIN_TICKS: u64 = 8;

fn nanos(time: Timespec) -> u64 {
    let seconds = u64::try_from(time.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(time.tv_nsec).unwrap_or(0);
    seconds.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// Nanoseconds of CLOCK_MONOTONIC, `Instant`'s clock.
pub(super) fn monotonic_nanos() -> u64 {
    nanos(clock_gettime(ClockId::Monotonic))
}

/// A time in nanoseconds of CLOCK_MONOTONIC no earlier than now, read
/// from the coarse clock.
pub(crate) fn lease_now() -> u64 {
    static MARGIN: OnceLock<u64> = OnceLock::new();
    let margin = *MARGIN.get_or_init(|| nanos(clock_getres(ClockId::MonotonicCoarse)).saturating_mul(MARGIN_TICKS));
    nanos(clock_gettime(ClockId::MonotonicCoarse)).saturating_add(margin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_now_is_never_behind_the_precise_clock_and_at_most_its_margin_and_a_tick_ahead() {
        let tick = nanos(clock_getres(ClockId::MonotonicCoarse));
        for _ in 0..100_000 {
            let coarse = lease_now();
            let precise = monotonic_nanos();
            let again = lease_now();
            assert!(again >= precise, "coarse {again} behind precise {precise}");
            assert!(coarse <= precise + (MARGIN_TICKS + 1) * tick, "coarse {coarse} too far ahead of {precise}");
        }
    }
}
