//! How long the room last seen on the file system is trusted before
//! [`crate::SpaceManager`] asks `statfs` again.
//!
//! The room beyond what a call needs is the margin a stale answer has: a
//! write that makes it wrong must fill that margin first. Trusting it for
//! [`ROOM_CHECK_EVERY`] per [`ROOM_CHECK_NEAR`] of margin assumes the file
//! system fills no faster than `ROOM_CHECK_NEAR` in `ROOM_CHECK_EVERY`
//! (6.4 GB/s) at any margin, so a store with gigabytes free asks ten
//! times a second, not a hundred, and one near its reserve on every call.
//! The trust is capped at [`ROOM_CHECK_LONGEST`], short, because what fills
//! the file system may be faster than that rate (another process's
//! `fallocate`, a RAM-backed file system) and because the store's own
//! reserve is not re-read while the room is trusted.

use std::time::{Duration, Instant};

/// How long [`crate::SpaceManager`] trusts the room it last saw, per
/// [`ROOM_CHECK_NEAR`] of room beyond what a call needs.
pub const ROOM_CHECK_EVERY: Duration = Duration::from_millis(10);
/// Room beyond what a call needs under which [`crate::SpaceManager`] asks
/// the file system on every call.
pub const ROOM_CHECK_NEAR: u64 = 64 << 20;
/// The longest the room last seen is trusted, however large.
pub const ROOM_CHECK_LONGEST: Duration = Duration::from_millis(100);

/// How long room `room`, seen on the file system, is trusted for a call
/// that needs `need` bytes of it: nothing within [`ROOM_CHECK_NEAR`] of
/// `need`, else [`ROOM_CHECK_EVERY`] per whole `ROOM_CHECK_NEAR` of
/// margin, at most [`ROOM_CHECK_LONGEST`].
pub(crate) fn trusted_for(room: u64, need: u64) -> Duration {
    let margin = room.saturating_sub(need);
    if margin <= ROOM_CHECK_NEAR {
        return Duration::ZERO;
    }
    let nears = u32::try_from(margin / ROOM_CHECK_NEAR).unwrap_or(u32::MAX);
    ROOM_CHECK_EVERY.saturating_mul(nears).min(ROOM_CHECK_LONGEST)
}

/// Whether room `room`, seen at `at`, still answers for a call that
/// needs `need` bytes of it ([`trusted_for`]).
pub(crate) fn still_trusted(at: Instant, room: u64, need: u64) -> bool {
    at.elapsed() < trusted_for(room, need)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_the_need_nothing_is_trusted() {
        assert_eq!(trusted_for(0, 0), Duration::ZERO);
        assert_eq!(trusted_for(ROOM_CHECK_NEAR, 0), Duration::ZERO);
        assert_eq!(trusted_for(ROOM_CHECK_NEAR + 4096, 4096), Duration::ZERO);
        assert_eq!(trusted_for(4096, 1 << 30), Duration::ZERO);
        let long_ago = Instant::now().checked_sub(Duration::from_millis(1)).unwrap_or_else(Instant::now);
        assert!(!still_trusted(long_ago, ROOM_CHECK_NEAR, 0));
    }

    #[test]
    fn the_fill_rate_assumed_is_never_above_near_per_every() {
        // For every margin, the time trusted is at most the time the
        // margin takes to fill at ROOM_CHECK_NEAR per ROOM_CHECK_EVERY.
        let mut room = ROOM_CHECK_NEAR + 1;
        while room < u64::MAX / 3 {
            for need in [0, 4096, ROOM_CHECK_NEAR] {
                let t = trusted_for(room, need);
                let margin = room.saturating_sub(need);
                let fills_in = ROOM_CHECK_EVERY.as_nanos() * u128::from(margin) / u128::from(ROOM_CHECK_NEAR);
                assert!(t.as_nanos() <= fills_in, "room {room} need {need}: trusted {t:?}");
                assert!(t <= ROOM_CHECK_LONGEST);
            }
            room = room * 3 / 2;
        }
        assert_eq!(trusted_for(2 * ROOM_CHECK_NEAR, 0), 2 * ROOM_CHECK_EVERY);
        assert_eq!(trusted_for(u64::MAX, 0), ROOM_CHECK_LONGEST);
    }

    #[test]
    fn a_room_seen_longer_ago_than_trusted_is_asked_again() {
        let room = 1000 * ROOM_CHECK_NEAR;
        assert_eq!(trusted_for(room, 0), ROOM_CHECK_LONGEST);
        assert!(still_trusted(Instant::now(), room, 0));
        if let Some(old) = Instant::now().checked_sub(ROOM_CHECK_LONGEST) {
            assert!(!still_trusted(old, room, 0));
        }
    }
}
