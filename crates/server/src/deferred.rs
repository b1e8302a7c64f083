//! Requests a worker holds back until the leases they revoke are settled
//! (docs/server.md, "Leases": waiting for a revocation).
//!
//! A worker never waits for a client: a request whose revocation is not
//! settled at once waits here, with its revocation (so no lease on its
//! targets is granted meanwhile), and the worker goes on serving every
//! other client. It takes no further request from that client's ring
//! until this one has executed, so one client's requests stay in order.
//! Each round the worker looks at its deferred requests again; a client
//! that acknowledges rings the worker's doorbell, and a silent one's
//! leases expire within one term, until which the worker's sleeps are
//! bounded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use larder_protocol::message::{Request, Response};

use crate::clients::ConnectedClient;
use crate::leases::Revocation;
use crate::server::Shared;
use crate::worker::{deliver, execute_now, Delivery};

/// A request waiting for its revocation.
pub(crate) struct Deferred {
    /// Whose request it is.
    pub(crate) client: Arc<ConnectedClient>,
    /// Its request id.
    pub(crate) id: u64,
    /// The request.
    pub(crate) request: Request,
    /// The revocation it waits for.
    pub(crate) revocation: Revocation,
}

/// Executes and answers the deferred requests whose revocation is
/// settled (all of them with ESHUTDOWN when the server stops); drops
/// those of clients that are gone. Returns how many it answered.
pub(crate) fn resume(
    shared: &Shared,
    worker: u32,
    deferred: &mut Vec<Deferred>,
    stopping: bool,
    reply: &mut Vec<u8>,
) -> usize {
    let mut answered = 0;
    let mut index = 0;
    while index < deferred.len() {
        let waiting = &mut deferred[index];
        if waiting.client.is_closed() {
            deferred.swap_remove(index);
            continue;
        }
        if !stopping && !waiting.revocation.settled() {
            index += 1;
            continue;
        }
        let Deferred { client, id, request, revocation } = deferred.swap_remove(index);
        let response = if stopping {
            Ok(Response::Error { errno: libc::ESHUTDOWN, message: "the server is shutting down".into() })
        } else {
            let (_, file) = shared.route(&client, &request);
            execute_now(shared, worker, &client, request, file)
        };
        drop(revocation);
        answered += 1;
        let response = match response {
            Ok(response) => response,
            Err(why) => {
                client.close(&why);
                continue;
            }
        };
        let Ok(rings) = client.region.server_rings(worker) else { continue };
        if deliver(&client, worker, rings, id, &response, reply) == Delivery::Sent {
            crate::worker::wake(rings);
        }
    }
    answered
}

/// How long an idle worker may sleep: `longest`, or less when a deferred
/// request's revocation settles by expiry sooner (acknowledgements ring
/// the doorbell; the bound of a few milliseconds covers a client that
/// acknowledges without ringing).
pub(crate) fn patience(deferred: &[Deferred], longest: Duration) -> Duration {
    const POLL: Duration = Duration::from_millis(5);
    let now = Instant::now();
    deferred
        .iter()
        .map(|d| d.revocation.deadline().map_or(Duration::ZERO, |at| at.saturating_duration_since(now)).min(POLL))
        .fold(longest, Duration::min)
}
