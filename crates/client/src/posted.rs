//! Requests posted without waiting for their answers: releases (a close,
//! whose error nobody could act on) and writes (a buffered write, whose
//! failure the next flush point of its file returns).
//!
//! A posted write's failure is kept as Linux keeps a file's writeback
//! error (errseq): a count of failures per file and the first failure
//! not yet reported; every open file remembers the count it has seen (at
//! its open: all reported failures), so the next `sync_all` or `close`
//! of each file open when the write failed returns it, once each. A read
//! of a file with posted writes unanswered first reads their answers, so
//! the cached pages (which took the write when it was posted) never
//! serve bytes the server refused.
//!
//! A posted request travels on the ring of its handle's worker, so the
//! worker's later requests execute after it. Before any call, the client
//! reads the answers of every posted write, on every ring (on the call's
//! own only where files can move: the layout has several workers), and
//! of the releases posted on other rings than the call's; a posted request
//! answered with a redirect (its file moved meanwhile) is sent again to
//! the new owner, in the order it was posted, before the call is sent;
//! a call that finds posts another thread is sending again waits for
//! their answers (as a read of a file with posted writes does), so a read
//! never overtakes a redirected write. So once any later call of the
//! client is answered, everything it posted before has taken effect.

use std::sync::atomic::{AtomicU64, Ordering};

use larder_protocol::message::{Payload, Request, Response};

use super::{Channel, Connection};
use crate::error::{ClientError, Result};

/// Requests one ring may carry posted and unanswered; one more first
/// reads the oldest answer. Well below the server's `max_in_flight`
/// (256 by default), so a posted request is never refused for it.
const MAX_POSTED_PER_RING: usize = 32;

/// What a posted release counts for against a ring's room (its record).
const RELEASE_BYTES: usize = 64;

/// A request posted without waiting for its answer.
pub(super) enum Posted {
    /// A release of `handle`.
    Release { handle: u64 },
    /// A write of `length` bytes through `handle` to file `ino`; the
    /// request is kept to be sent again where a redirect says its file
    /// went.
    Write { handle: u64, ino: u64, length: usize, request: Request },
}

/// Posted requests answered with a redirect, to send again.
#[derive(Default)]
pub(super) struct Redirected {
    /// In the order they were posted, with the worker the file went to.
    posts: Vec<(Posted, u32)>,
    /// Taken out of `posts` by a thread sending them again and not yet
    /// answered.
    resending: usize,
}

/// Posts a thread took out of [`Redirected::posts`] to send again: counted
/// off and the waiters woken when dropped, whether sending them returned
/// or panicked, so a panic in one thread does not leave the others
/// waiting for good.
struct Resending<'a> {
    connection: &'a Connection,
    taken: usize,
}

impl Drop for Resending<'_> {
    fn drop(&mut self) {
        self.connection.redirected_posts.lock().resending -= self.taken;
        self.connection.resent.notify_all();
    }
}

/// The failures of posted writes to one file (Linux's errseq).
#[derive(Debug)]
pub(super) struct WriteErrors {
    /// Failures so far.
    count: u64,
    /// The first failure not yet reported (else the last reported).
    errno: i32,
    message: String,
    /// Whether an open file returned the latest failure.
    reported: bool,
}

impl Posted {
    /// About what its request takes of a ring.
    pub(super) fn bytes(&self) -> usize {
        match self {
            Posted::Release { .. } => RELEASE_BYTES,
            Posted::Write { length, .. } => RELEASE_BYTES + length,
        }
    }
}

impl Connection {
    /// Releases `handle` without waiting for the answer (a close, whose
    /// error nobody could act on). Takes effect before the answer of this
    /// client's next call.
    pub(crate) fn post_release(&self, handle: u64) -> Result<()> {
        let worker = self.handle_workers.lock().remove(&handle).unwrap_or_else(|| self.home.load(Ordering::Relaxed));
        let request = Request::Release { handle };
        // The handle is gone for the cache now, whatever the answer.
        let unusable = self.cache.after_own(&request, &Ok(Response::Done), None);
        crate::cache::release_all(self, &unusable);
        self.post(worker, Posted::Release { handle })
    }

    /// Writes `data` at `offset` through `handle`, open on file `ino` (at
    /// the end for a file opened to append) without waiting for the
    /// answer: the data is copied into the request, which takes effect
    /// before the answer of this client's next call. Its failure is kept
    /// for the file and returned by [`Connection::take_post_failure`].
    /// `data` must fit one request inline (at most
    /// [`Connection::inline_request_bytes`]); longer is EINVAL, and
    /// nothing is sent.
    pub(crate) fn post_write(&self, handle: u64, ino: u64, offset: u64, data: &[u8]) -> Result<()> {
        if data.len() > self.inline_request_bytes() {
            return Err(ClientError::Invalid(format!(
                "a posted write of {} bytes; one request carries at most {}",
                data.len(),
                self.inline_request_bytes()
            )));
        }
        let worker =
            self.handle_workers.lock().get(&handle).copied().unwrap_or_else(|| self.home.load(Ordering::Relaxed));
        // Posted writes execute in the client's order across workers too:
        // those posted elsewhere are answered first; those on this ring
        // execute before it anyway.
        self.settle_posted_with(worker, false, true)?;
        let request = Request::Write { handle, offset, data: Payload::Inline(data.to_vec()) };
        // Counted before it is sent: another thread may read its answer
        // (and count it off) before `post` returns.
        self.posted_writes.fetch_add(1, Ordering::AcqRel);
        *self.posted_files.lock().entry(ino).or_insert(0) += 1;
        let posted = self.post(worker, Posted::Write { handle, ino, length: data.len(), request });
        if posted.is_err() {
            self.file_write_answered(ino);
        }
        posted
    }

    /// Sends the request of `posted` on `worker`'s ring and records it.
    fn post(&self, worker: u32, posted: Posted) -> Result<()> {
        let mut channel = self.live_channel(worker)?.lock();
        // Posted requests fill at most half the ring: a post that finds
        // it fuller waits for the oldest answer (a futex wait), where one
        // that found the ring full would poll it, yielding, and on busy
        // CPUs keep the worker it waits for off them.
        let room = self.welcome.layout.request_ring_bytes as usize / 2;
        while !channel.posted.is_empty()
            && (channel.posted.len() >= MAX_POSTED_PER_RING || channel.posted_bytes + posted.bytes() > room)
        {
            self.next_completion(worker, &mut channel)?;
        }
        let id = match &posted {
            Posted::Release { handle } => self.send(worker, &mut channel, &Request::Release { handle: *handle })?,
            Posted::Write { request, .. } => {
                let id = self.send(worker, &mut channel, request)?;
                // The cached pages take the write now, under the ring's lock:
                // writes posted on one ring patch them in the order the
                // worker executes them. A read after it is served the bytes
                // from the cache, or is a call, which waits for the write's
                // answer first.
                if let Request::Write { handle, offset, data: Payload::Inline(bytes) } = request {
                    self.cache.posted_write(*handle, *offset, bytes);
                }
                id
            }
        };
        channel.posted_bytes += posted.bytes();
        channel.posted.push_back((id, posted));
        self.posted.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Records the answer to a posted request: a redirect to send it
    /// again, a write's failure for its handle.
    pub(super) fn posted_answered(&self, posted: Posted, response: Response) {
        self.posted.fetch_sub(1, Ordering::AcqRel);
        if let Response::Redirect { worker } = response {
            if let Posted::Write { ino, .. } = &posted {
                // Sent again later, after writes posted since: their patches
                // of the cached pages may be out of its order. (It stays
                // unanswered, for `posted_writes` and `posted_files`, until
                // it is answered where it went.)
                self.cache.write_failed(*ino);
            }
            self.redirected_posts.lock().posts.push((posted, worker));
            return;
        }
        match posted {
            // Its handle is gone: no later call can take a failure of it.
            Posted::Release { handle } => {
                self.post_failures.lock().remove(&handle);
            }
            Posted::Write { ino, length, .. } => self.write_answered(ino, length, Ok(response)),
        }
    }

    /// Keeps the failure, if `answer` is one, of a posted write of
    /// `length` bytes to file `ino`, for every file open on it (the first
    /// not yet reported, if several failed).
    fn write_answered(&self, ino: u64, length: usize, answer: Result<Response>) {
        let failure = match answer {
            Ok(Response::Length(n)) if n == length as u64 => None,
            Ok(Response::Length(n)) => Some((libc::EIO, format!("a posted write of {length} bytes wrote {n}"))),
            Ok(Response::Error { errno, message }) => Some((errno, message)),
            Ok(other) => {
                let e = crate::unexpected("posted write", &other);
                Some((e.errno(), e.to_string()))
            }
            Err(e) => Some((e.errno(), e.to_string())),
        };
        if let Some((errno, message)) = failure {
            // The cached pages took the write when it was posted: dropped
            // before a read can wait for this answer and find them.
            self.cache.write_failed(ino);
            let mut errors = self.write_errors.lock();
            let kept =
                errors.entry(ino).or_insert(WriteErrors { count: 0, errno, message: String::new(), reported: true });
            if kept.reported {
                (kept.errno, kept.message) = (errno, message);
            }
            kept.count += 1;
            kept.reported = false;
        }
        self.file_write_answered(ino);
    }

    /// One posted write to `ino` fewer unanswered.
    fn file_write_answered(&self, ino: u64) {
        self.posted_writes.fetch_sub(1, Ordering::AcqRel);
        let mut files = self.posted_files.lock();
        if let Some(n) = files.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                files.remove(&ino);
            }
        }
    }

    /// The failures of posted writes to `ino` a file opened now has seen:
    /// those reported already (one not yet reported, the file returns, as
    /// Linux's errseq_sample leaves it to a new open).
    pub(crate) fn write_errors_seen(&self, ino: u64) -> u64 {
        match self.write_errors.lock().get(&ino) {
            Some(e) if e.reported => e.count,
            Some(e) => e.count - 1,
            None => 0,
        }
    }

    /// Before a read of file `ino` through the cache: reads the answers
    /// of the writes posted to it, and waits for those another thread is
    /// sending again after a redirect, so the cached pages hold only bytes
    /// the server took (a refused write's are dropped when its answer is
    /// read) and a read from the server comes after the writes.
    pub(crate) fn settle_posted_to(&self, ino: u64) -> Result<()> {
        if self.posted_writes.load(Ordering::Acquire) > 0 && self.posted_files.lock().contains_key(&ino) {
            self.settle_all_posted()?;
        }
        Ok(())
    }

    /// Records `failure` as the answer of a write posted through `handle`
    /// that was not sent (the client refused it itself, as the server
    /// would have): returned as a posted write's failure is.
    pub(crate) fn refuse_posted(&self, handle: u64, failure: ClientError) {
        self.post_failures.lock().entry(handle).or_insert(failure);
    }

    /// For a file open as `handle` on `ino`, which has seen `seen` of the
    /// failures of writes posted to `ino`: a write through `handle` the
    /// client refused itself, else a failure of a posted write to `ino`
    /// the file has not seen (then it has). Waits for the answers of the
    /// writes posted so far, so a failure of any of them is seen.
    pub(crate) fn take_post_failure(&self, handle: u64, ino: u64, seen: &AtomicU64) -> Result<()> {
        if self.posted_writes.load(Ordering::Acquire) > 0 {
            self.settle_all_posted()?;
        }
        self.take_known_post_failure(handle, ino, seen)
    }

    /// As [`Connection::take_post_failure`], without waiting: only a
    /// failure whose answer was read already.
    pub(crate) fn take_known_post_failure(&self, handle: u64, ino: u64, seen: &AtomicU64) -> Result<()> {
        if let Some(failure) = self.post_failures.lock().remove(&handle) {
            return Err(failure);
        }
        let mut errors = self.write_errors.lock();
        let Some(e) = errors.get_mut(&ino) else { return Ok(()) };
        if e.count <= seen.load(Ordering::Acquire) {
            return Ok(());
        }
        seen.store(e.count, Ordering::Release);
        e.reported = true;
        Err(ClientError::Server { errno: e.errno, message: e.message.clone() })
    }

    /// Reads the answers of every request posted, on every ring.
    fn settle_all_posted(&self) -> Result<()> {
        for (worker, channel) in self.channels.iter().enumerate() {
            let mut channel = channel.lock();
            self.drain(worker as u32, &mut channel, |_| true)?;
        }
        self.resend_redirected_posts(true)
    }

    /// Before a call on `worker`: reads the answers of requests posted
    /// on every other worker's ring and of writes posted on `worker`'s
    /// own (its releases execute before the call anyway), and sends
    /// again, where their files went, those that were redirected (waiting
    /// for those another thread is sending again, with `wait_resends`).
    pub(super) fn settle_posted(&self, worker: u32, wait_resends: bool) -> Result<()> {
        self.settle_posted_with(worker, true, wait_resends)
    }

    /// As [`Connection::settle_posted`]; the writes posted on `worker`'s
    /// own ring are waited for only with `own_writes`, and only when the
    /// layout has other workers: with one, no file can move, no posted
    /// write is redirected, and the ring's order is the client's.
    fn settle_posted_with(&self, worker: u32, own_writes: bool, wait_resends: bool) -> Result<()> {
        let own_writes = own_writes && self.channels.len() > 1;
        if self.posted.load(Ordering::Acquire) > 0 {
            for (other, channel) in self.channels.iter().enumerate() {
                let mut channel = channel.lock();
                if other == worker as usize {
                    if own_writes {
                        self.drain(worker, &mut channel, |posted| matches!(posted, Posted::Write { .. }))?;
                    }
                } else {
                    self.drain(other as u32, &mut channel, |_| true)?;
                }
            }
        }
        self.resend_redirected_posts(wait_resends)
    }

    /// Reads completions of `worker`'s ring (its lock held as `channel`)
    /// until no posted request that `wanted` picks is unanswered.
    fn drain(&self, worker: u32, channel: &mut Channel, wanted: impl Fn(&Posted) -> bool) -> Result<()> {
        while channel.posted.iter().any(|(_, posted)| wanted(posted)) {
            // Answers of abandoned calls are dropped; posted ones are
            // recorded as they come.
            self.next_completion(worker, channel)?;
        }
        Ok(())
    }

    /// Sends again, where their files went and in the order they were
    /// posted, the posted requests that were answered with a redirect;
    /// then, with `wait`, waits until those another thread took to send
    /// again are answered. A thread sending posts again calls without
    /// `wait`: it would wait for itself.
    pub(super) fn resend_redirected_posts(&self, wait: bool) -> Result<()> {
        loop {
            let redirected = {
                let mut redirected = self.redirected_posts.lock();
                if redirected.posts.is_empty() {
                    if !wait || redirected.resending == 0 {
                        return Ok(());
                    }
                    #[cfg(feature = "test-hooks")]
                    self.hooks.waiting_for_resends();
                    self.resent.wait(&mut redirected);
                    continue;
                }
                // Counted as taken under the lock that held them: a thread
                // that finds the list empty sees them being sent.
                let posts = std::mem::take(&mut redirected.posts);
                redirected.resending += posts.len();
                posts
            };
            let _resending = Resending { connection: self, taken: redirected.len() };
            self.send_again(redirected)?;
        }
    }

    /// Sends `redirected` again, each where its file went, in order. A
    /// write not sent (the connection failed, or the redirect was not
    /// one the layout has) is answered with that failure, as one the
    /// server refused.
    fn send_again(&self, redirected: Vec<(Posted, u32)>) -> Result<()> {
        let mut posts = redirected.into_iter();
        let failure = loop {
            let Some((posted, to)) = posts.next() else { return Ok(()) };
            if to as usize >= self.channels.len() {
                if let Posted::Write { ino, length, .. } = posted {
                    let failure = ClientError::Protocol(format!("redirect to worker {to}, beyond the layout"));
                    self.write_answered(ino, length, Err(failure));
                }
                break ClientError::Protocol(format!("redirect to worker {to}, beyond the layout"));
            }
            match posted {
                Posted::Release { handle } => {
                    self.handle_workers.lock().insert(handle, to);
                    // A failure leaves the handle to the session's end.
                    let _ = self.call_uncounted(&Request::Release { handle }, false);
                    self.forget_handle(handle);
                    self.post_failures.lock().remove(&handle);
                }
                Posted::Write { handle, ino, length, request } => {
                    self.handle_workers.lock().insert(handle, to);
                    #[cfg(feature = "test-hooks")]
                    self.hooks.resending();
                    let answer = match self.call_uncounted(&request, false) {
                        Err(ClientError::Server { errno, message }) => Ok(Response::Error { errno, message }),
                        answer => answer,
                    };
                    let gone = matches!(answer, Err(ClientError::ServerGone));
                    self.write_answered(ino, length, answer);
                    if gone {
                        break ClientError::ServerGone;
                    }
                }
            }
        };
        for (posted, _) in posts {
            if let Posted::Write { ino, length, .. } = posted {
                let unsent = match &failure {
                    ClientError::ServerGone => ClientError::ServerGone,
                    other => ClientError::Protocol(format!("a redirected write not sent again: {other}")),
                };
                self.write_answered(ino, length, Err(unsent));
            }
        }
        Err(failure)
    }
}
