//! The `server:` section of the `Stats` text when a server answers it:
//! what the server holds for its clients now (connections, sessions,
//! handles, requests in flight, completions waiting for room) and what
//! each worker has done, so that people and tests can see the server's
//! state and check that a client that died left nothing behind.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::server::Shared;

/// The section, one fact per line, each `  name: value` with the numbers
/// first so that a script can read them.
pub(crate) fn section(shared: &Shared) -> String {
    let clients = shared.registry.snapshot();
    let live: Vec<_> = clients.iter().filter(|c| !c.is_closed()).collect();
    let handles: usize = live.iter().map(|c| c.session.handle_count()).sum();
    let in_flight: u64 = live.iter().map(|c| u64::from(c.session.in_flight())).sum();
    let backlog: usize = live.iter().map(|c| c.backlog.iter().map(|b| b.lock().len()).sum::<usize>()).sum();
    let limits = shared.state.limits();
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "server:");
    let _ = writeln!(out, "  pid:              {}", std::process::id());
    let _ = writeln!(out, "  epoch:            {:#018x}", shared.state.epoch());
    let active = shared.placement.active();
    let _ = writeln!(
        out,
        "  workers:          {active} running ({}..{}), {} placed files",
        limits.min_workers,
        limits.max_workers,
        shared.placement.placed_files()
    );
    let load = shared.load_tally.get();
    let _ = writeln!(
        out,
        "  load manager:     {} windows, {} added, {} parked, {} balanced, {} clients moved, {} files moved{}",
        load.windows,
        load.added,
        load.parked,
        load.balanced,
        load.clients_moved,
        load.files_moved,
        if shared.managed { "" } else { " (off: a fixed round-robin placement)" }
    );
    let _ = writeln!(out, "  clients:          {} connected (limit {})", live.len(), limits.max_clients);
    // A session outlives its connection until every worker has let go of
    // it; one that never goes is a leak.
    let _ = writeln!(out, "  sessions:         {} open", shared.state.clients());
    let _ = writeln!(out, "  open handles:     {handles} in all sessions");
    let _ = writeln!(out, "  in flight:        {in_flight} requests executing");
    let _ = writeln!(out, "  backlog:          {backlog} completions waiting for room in a ring");
    let _ = writeln!(out, "  handshakes:       {} under way", shared.handshakes_under_way.load(Ordering::Acquire));
    // Parked workers are listed too: they served requests before.
    let started = shared.started_workers();
    for (w, stats) in shared.worker_stats.iter().enumerate().take(started) {
        let _ = writeln!(
            out,
            "  worker {w}:{:pad$}{} requests, {:.3} s busy, {} redirects",
            "",
            stats.requests.load(Ordering::Relaxed),
            stats.busy_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            stats.redirects.load(Ordering::Relaxed),
            pad = 10usize.saturating_sub(w.to_string().len()),
        );
    }
    out
}
