//! Test hooks (the `test-hooks` feature, which only tests enable): a hold
//! on the posted writes a thread sends again after a redirect, so a test
//! can make another thread's read race such a write deterministically.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

/// What a [`ResendHold`] has seen so far.
#[derive(Debug, Default, Clone, Copy)]
pub struct HoldState {
    /// Whether writes about to be sent again wait (until released).
    pub held: bool,
    /// Writes that reached the point of being sent again.
    pub resends: usize,
    /// Times a thread waited for writes another was sending again.
    pub waits: usize,
}

#[derive(Default)]
struct Shared {
    state: Mutex<HoldState>,
    changed: Condvar,
}

/// The connection's hooks.
#[derive(Default)]
pub(crate) struct Hooks {
    shared: Arc<Shared>,
}

impl Hooks {
    /// A redirected write is about to be sent again: counted, and held
    /// there while the hold is on.
    pub(crate) fn resending(&self) {
        let mut state = self.shared.state.lock();
        state.resends += 1;
        self.shared.changed.notify_all();
        while state.held {
            self.shared.changed.wait(&mut state);
        }
    }

    /// A thread waits for redirected posts another is sending again.
    pub(crate) fn waiting_for_resends(&self) {
        self.shared.state.lock().waits += 1;
        self.shared.changed.notify_all();
    }

    /// Holds writes about to be sent again until the hold is released.
    pub(crate) fn hold(&self) -> ResendHold {
        self.shared.state.lock().held = true;
        ResendHold { shared: self.shared.clone() }
    }
}

/// A hold on a client's redirected writes (see [`crate::Client::hold_resends`]).
pub struct ResendHold {
    shared: Arc<Shared>,
}

impl ResendHold {
    /// Waits until `done` says yes of the hold's state; checked again at
    /// each change and at each [`ResendHold::wake`].
    pub fn wait_until(&self, done: impl Fn(&HoldState) -> bool) -> HoldState {
        let mut state = self.shared.state.lock();
        while !done(&state) {
            self.shared.changed.wait(&mut state);
        }
        *state
    }

    /// Wakes a [`ResendHold::wait_until`] to look again (at something the
    /// caller changed outside the hold's state).
    pub fn wake(&self) {
        let _state = self.shared.state.lock();
        self.shared.changed.notify_all();
    }

    /// Lets held writes and later ones be sent.
    pub fn release(&self) {
        self.shared.state.lock().held = false;
        self.shared.changed.notify_all();
    }
}

impl Drop for ResendHold {
    fn drop(&mut self) {
        self.release();
    }
}
