//! The load manager (uFS's): every window it reads how busy each worker
//! was, and when several windows in a row agree, it adds a worker, parks
//! one, or moves load from the busiest worker to the idlest: whole clients
//! first (a client's requests then queue on one worker), then hot files.
//!
//! Two signals per worker: its busy share of the window, and uFS's
//! congestion (other clients waiting per request served), which still
//! shows queues when the machine's cores are oversubscribed and busy time
//! does not. Decisions are in `verdict`, `Agreement` and `shed`, pure
//! functions of the measured windows, so they are tested without threads
//! or clocks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::server::Shared;

/// How the load manager decides.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadPolicy {
    /// Length of one measuring window. Default 5 ms.
    pub window: Duration,
    /// Windows in a row that must agree before anything changes. Default 4.
    pub agree: u32,
    /// A worker busier than this share of a window is overloaded. Default 0.85.
    pub high: f64,
    /// Workers are parked while the total load fits in one fewer worker,
    /// each at most this busy. Default 0.5.
    pub low: f64,
    /// Load moves when the busiest and the idlest worker differ by more
    /// than this share. Default 0.4.
    pub imbalance: f64,
    /// A worker is congested when, on average, more than this many other
    /// clients had requests waiting in its rings while it served one.
    /// Default 0.5. Busy time alone misleads when the machine's cores are
    /// oversubscribed (a worker that gets the CPU a fifth of the time is
    /// busy a fifth of the window, however long its queues); queues do
    /// not.
    pub congestion: f64,
    /// Whether the manager keeps to no more workers than the CPUs this
    /// process may run on (uFS gives each worker a core of its own: a
    /// worker past the CPUs adds no capacity, only more threads taking
    /// turns, and the queues that oversubscription makes would otherwise
    /// keep asking for more). Default true. `Server::set_active_workers`
    /// is not capped.
    pub cap_at_cpus: bool,
    /// A worker parked and then added again within this many windows
    /// makes the next park need twice as many agreeing windows (up to 64
    /// times `agree`); a park that stands that long halves it again.
    /// Default 40. Without it, a load that one fewer worker cannot carry
    /// but that looks light while spread (clients that think between
    /// calls) parks and adds a worker every few windows.
    pub undo_windows: u32,
}

impl Default for LoadPolicy {
    fn default() -> Self {
        LoadPolicy {
            window: Duration::from_millis(5),
            agree: 4,
            high: 0.85,
            low: 0.5,
            imbalance: 0.4,
            congestion: 0.5,
            cap_at_cpus: true,
            undo_windows: 40,
        }
    }
}

/// The most workers the manager runs: `max`, or fewer when the policy
/// keeps to the `cpus` this process may run on (never below `min`).
pub(crate) fn manager_max(policy: &LoadPolicy, min: u32, max: u32, cpus: u32) -> u32 {
    if policy.cap_at_cpus {
        max.min(cpus.max(min)).max(1)
    } else {
        max
    }
}

/// How many agreeing windows a park needs: `agree`, times a factor that
/// doubles each time a park is undone (a worker added again within
/// `undo_windows`) and halves each time one stands that long.
#[derive(Debug)]
pub(crate) struct ParkBackoff {
    factor: u32,
    last_park: Option<u64>,
}

impl Default for ParkBackoff {
    fn default() -> Self {
        ParkBackoff { factor: 1, last_park: None }
    }
}

/// The most a park's agreement is multiplied by.
const MAX_PARK_FACTOR: u32 = 64;

impl ParkBackoff {
    /// Windows of agreement a park needs now.
    pub(crate) fn needed(&self, agree: u32) -> u32 {
        agree.saturating_mul(self.factor)
    }

    /// Window `window` begins: a park that stood `undo` windows halves the factor.
    pub(crate) fn tick(&mut self, window: u64, undo: u32) {
        if let Some(parked) = self.last_park {
            if window.saturating_sub(parked) > u64::from(undo) {
                self.factor = (self.factor / 2).max(1);
                self.last_park = None;
            }
        }
    }

    /// The manager parked a worker after window `window`.
    pub(crate) fn parked(&mut self, window: u64) {
        self.last_park = Some(window);
    }

    /// The manager added a worker after window `window`: a park it undoes
    /// (within `undo` windows) doubles the factor.
    pub(crate) fn added(&mut self, window: u64, undo: u32) {
        if let Some(parked) = self.last_park.take() {
            if window.saturating_sub(parked) <= u64::from(undo) {
                self.factor = (self.factor * 2).min(MAX_PARK_FACTOR);
            }
        }
    }
}

/// What the load manager has done since the server started: how many
/// windows it judged and what it did after them. Worker counts changed by
/// `Server::set_active_workers` and files moved by `Server::move_file`
/// are not counted: only the manager's own decisions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadCounters {
    /// Windows measured.
    pub windows: u64,
    /// Workers it started or unparked.
    pub added: u64,
    /// Workers it parked.
    pub parked: u64,
    /// Moves of load between two active workers.
    pub balanced: u64,
    /// Clients whose home it moved (parking included).
    pub clients_moved: u64,
    /// Files it asked their owner to hand over (parking included).
    pub files_moved: u64,
}

/// The manager's counters, updated by its thread and read by anyone.
#[derive(Default)]
pub(crate) struct LoadTally {
    windows: AtomicU64,
    added: AtomicU64,
    parked: AtomicU64,
    balanced: AtomicU64,
    clients_moved: AtomicU64,
    files_moved: AtomicU64,
}

impl LoadTally {
    /// The counts now.
    pub(crate) fn get(&self) -> LoadCounters {
        LoadCounters {
            windows: self.windows.load(Ordering::Relaxed),
            added: self.added.load(Ordering::Relaxed),
            parked: self.parked.load(Ordering::Relaxed),
            balanced: self.balanced.load(Ordering::Relaxed),
            clients_moved: self.clients_moved.load(Ordering::Relaxed),
            files_moved: self.files_moved.load(Ordering::Relaxed),
        }
    }

    fn moved(&self, clients: usize, files: usize) {
        self.clients_moved.fetch_add(clients as u64, Ordering::Relaxed);
        self.files_moved.fetch_add(files as u64, Ordering::Relaxed);
    }
}

/// One worker's load in one window.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct WindowLoad {
    /// Nanoseconds spent executing requests.
    pub(crate) busy: u64,
    /// Of those, per client id: requests served at the client's home
    /// (moving the client's home moves them).
    pub(crate) clients: HashMap<u64, u64>,
    /// Of those, per placed file: requests on open files, served by the
    /// file's owner (moving the file moves them).
    pub(crate) files: HashMap<u64, u64>,
    /// Requests served.
    pub(crate) requests: u64,
    /// Summed over those, how many other clients had requests waiting.
    pub(crate) waiting: u64,
}

impl WindowLoad {
    /// Counts one request of `client`, on placed file `file` if any.
    pub(crate) fn add(&mut self, client: u64, file: Option<u64>, nanos: u64) {
        self.busy += nanos;
        self.requests += 1;
        match file {
            Some(file) => *self.files.entry(file).or_default() += nanos,
            None => *self.clients.entry(client).or_default() += nanos,
        }
    }
}

/// The workers' loads of the window being measured.
pub(crate) struct LoadBoard {
    windows: Vec<Mutex<WindowLoad>>,
}

impl LoadBoard {
    /// A board for `workers` workers.
    pub(crate) fn new(workers: u32) -> LoadBoard {
        LoadBoard { windows: (0..workers).map(|_| Mutex::new(WindowLoad::default())).collect() }
    }

    /// Counts a request that worker `worker` executed.
    pub(crate) fn add(&self, worker: u32, client: u64, file: Option<u64>, nanos: u64) {
        if let Some(window) = self.windows.get(worker as usize) {
            window.lock().add(client, file, nanos);
        }
    }

    /// Counts, for a round of worker `worker` that served `served`
    /// requests while `pending` clients had some waiting, the clients each
    /// of them waited behind.
    pub(crate) fn add_round(&self, worker: u32, served: u64, pending: u64) {
        if served == 0 {
            return;
        }
        if let Some(window) = self.windows.get(worker as usize) {
            window.lock().waiting += served * pending.saturating_sub(1);
        }
    }

    /// Ends the window: each worker's load, reset.
    fn take(&self) -> Vec<WindowLoad> {
        self.windows.iter().map(|w| std::mem::take(&mut *w.lock())).collect()
    }
}

/// What the manager does after a window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Nothing.
    Stay,
    /// Start one more worker and give it load from `from`.
    Add {
        /// The busiest worker.
        from: u32,
    },
    /// Park the last active worker, its clients and files moved to the others.
    Park,
    /// Move load from `from` to `to`.
    Balance {
        /// The busiest worker.
        from: u32,
        /// The idlest.
        to: u32,
    },
}

/// One worker's window, as the manager judges it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Measured {
    /// Share of the window spent executing requests.
    pub(crate) busy: f64,
    /// Other clients waiting, on average, per request served.
    pub(crate) congestion: f64,
}

impl Measured {
    /// `load` over a window of `elapsed` nanoseconds.
    pub(crate) fn of(load: &WindowLoad, elapsed: f64) -> Measured {
        let congestion = if load.requests == 0 { 0.0 } else { load.waiting as f64 / load.requests as f64 };
        Measured { busy: load.busy as f64 / elapsed.max(1.0), congestion }
    }
}

/// What the measured window says, before agreement.
pub(crate) fn verdict(measured: &[Measured], active: u32, min: u32, max: u32, policy: &LoadPolicy) -> Decision {
    let active_measured = &measured[..(active as usize).min(measured.len())];
    let busy: Vec<f64> = active_measured.iter().map(|m| m.busy).collect();
    let overloaded = |m: &Measured| m.busy > policy.high || m.congestion > policy.congestion;
    let Some((busiest, &top)) = busy.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)) else {
        return Decision::Stay;
    };
    let (idlest, &bottom) = busy.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)).unwrap_or((0, &0.0));
    let total: f64 = busy.iter().sum();
    if let Some((worst, _)) = active_measured
        .iter()
        .enumerate()
        .filter(|(_, m)| overloaded(m))
        .max_by(|a, b| a.1.congestion.total_cmp(&b.1.congestion).then(a.1.busy.total_cmp(&b.1.busy)))
    {
        if active < max {
            return Decision::Add { from: worst as u32 };
        }
    }
    let congested = active_measured.iter().any(|m| m.congestion > policy.congestion);
    if active > min && !congested && total < policy.low * f64::from(active - 1) {
        return Decision::Park;
    }
    if top - bottom > policy.imbalance {
        return Decision::Balance { from: busiest as u32, to: idlest as u32 };
    }
    Decision::Stay
}

/// Acts only on a verdict that `agree` windows in a row gave.
#[derive(Default)]
pub(crate) struct Agreement {
    last: Option<Decision>,
    count: u32,
}

impl Agreement {
    /// The decision to act on after this window's `verdict`, if it agreed
    /// long enough (the count starts again after acting).
    pub(crate) fn settle(&mut self, verdict: Decision, agree: u32) -> Decision {
        if Some(&verdict) == self.last.as_ref() {
            self.count += 1;
        } else {
            self.last = Some(verdict.clone());
            self.count = 1;
        }
        if verdict != Decision::Stay && self.count >= agree {
            self.count = 0;
            return verdict;
        }
        Decision::Stay
    }
}

/// Which clients and files to move from a worker to shed `goal`
/// nanoseconds of its window's load: whole clients first, largest that
/// fit first, then files, hottest that fit first. Clients or files with
/// no load in the window are never moved (moving them costs and sheds
/// nothing).
pub(crate) fn shed(load: &WindowLoad, goal: u64, homed_here: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let mut remaining = goal;
    let mut clients: Vec<(u64, u64)> =
        homed_here.iter().filter_map(|c| load.clients.get(c).map(|&n| (*c, n))).filter(|&(_, n)| n > 0).collect();
    clients.sort_by_key(|&(id, nanos)| (std::cmp::Reverse(nanos), id));
    let mut moved_clients = Vec::new();
    for (client, nanos) in clients {
        if nanos <= remaining {
            moved_clients.push(client);
            remaining -= nanos;
        }
    }
    let mut files: Vec<(u64, u64)> = load.files.iter().map(|(&f, &n)| (f, n)).filter(|&(_, n)| n > 0).collect();
    files.sort_by_key(|&(id, nanos)| (std::cmp::Reverse(nanos), id));
    let mut moved_files = Vec::new();
    for (file, nanos) in files {
        if remaining == 0 {
            break;
        }
        if nanos <= remaining {
            moved_files.push(file);
            remaining -= nanos;
        }
    }
    (moved_clients, moved_files)
}

/// Runs the load manager until the server stops.
pub(crate) fn run(shared: Arc<Shared>) {
    let policy = shared.load_policy.clone();
    let mut agreement = Agreement::default();
    let mut backoff = ParkBackoff::default();
    let cpus = std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX));
    let most = manager_max(&policy, shared.min_workers, shared.placement.max(), cpus);
    let mut window_start = Instant::now();
    let mut window = 0u64;
    while !shared.stopping.load(Ordering::Acquire) {
        std::thread::park_timeout(policy.window);
        let elapsed = window_start.elapsed().as_nanos().max(1) as f64;
        window_start = Instant::now();
        let loads = shared.load.take();
        let measured: Vec<Measured> = loads.iter().map(|l| Measured::of(l, elapsed)).collect();
        let busy: Vec<f64> = measured.iter().map(|m| m.busy).collect();
        let active = shared.placement.active();
        let verdict = verdict(&measured, active, shared.min_workers, most, &policy);
        window += 1;
        backoff.tick(window, policy.undo_windows);
        let needed = if verdict == Decision::Park { backoff.needed(policy.agree) } else { policy.agree };
        let decision = agreement.settle(verdict, needed);
        shared.load_tally.windows.fetch_add(1, Ordering::Relaxed);
        match decision {
            Decision::Park => backoff.parked(window),
            Decision::Add { .. } => backoff.added(window, policy.undo_windows),
            _ => {}
        }
        act(&shared, decision, &loads, &busy, elapsed);
    }
}

fn act(shared: &Arc<Shared>, decision: Decision, loads: &[WindowLoad], busy: &[f64], elapsed: f64) {
    let placement = &shared.placement;
    match decision {
        Decision::Stay => {}
        Decision::Add { from } => {
            let to = placement.active();
            if resize(shared, to + 1) == to + 1 {
                shared.load_tally.added.fetch_add(1, Ordering::Relaxed);
                let goal = (busy[from as usize] * elapsed / 2.0) as u64;
                let (clients, files) = move_load(shared, &loads[from as usize], from, to, goal);
                shared.load_tally.moved(clients, files);
                tracing::info!(workers = to + 1, from, "load manager: added a worker");
            }
        }
        Decision::Park => {
            let before = placement.active();
            let (clients, files) = moved_by_parking(shared, before.saturating_sub(1));
            let active = resize(shared, before.saturating_sub(1));
            if active < before {
                shared.load_tally.parked.fetch_add(1, Ordering::Relaxed);
                shared.load_tally.moved(clients, files);
            }
            tracing::info!(workers = active, "load manager: parked a worker");
        }
        Decision::Balance { from, to } => {
            let goal = ((busy[from as usize] - busy[to as usize]) * elapsed / 2.0) as u64;
            let (clients, files) = move_load(shared, &loads[from as usize], from, to, goal);
            if clients + files > 0 {
                shared.load_tally.balanced.fetch_add(1, Ordering::Relaxed);
                shared.load_tally.moved(clients, files);
            }
        }
    }
}

/// Makes `workers` workers active (within 1 and the most; at least the
/// minimum is the manager's business, not this function's): starts the
/// threads it needs, or parks the last ones, moving their clients' homes
/// and their files to the workers that stay. Returns the workers active.
pub(crate) fn resize(shared: &Arc<Shared>, workers: u32) -> u32 {
    let placement = &shared.placement;
    let workers = workers.clamp(1, placement.max());
    let active = placement.active();
    if workers > active {
        let mut started = active;
        while started < workers && shared.start_worker(started) {
            started += 1;
        }
        placement.set_active(started);
        return started;
    }
    placement.set_active(workers);
    for client in shared.registry.snapshot() {
        let home = client.home();
        if home >= workers {
            client.set_home(home % workers);
        }
    }
    for parked in workers..active {
        for file in placement.files_of(parked) {
            placement.request_move(file, parked % workers);
        }
        shared.ring(parked);
    }
    workers
}

/// The clients at home, and the files placed, on the workers that parking
/// down to `workers` active would move.
fn moved_by_parking(shared: &Shared, workers: u32) -> (usize, usize) {
    let placement = &shared.placement;
    let clients = shared.registry.snapshot().iter().filter(|c| c.home() >= workers).count();
    let files = (workers..placement.active()).map(|w| placement.files_of(w).len()).sum();
    (clients, files)
}

/// Moves about `goal` nanoseconds of `from`'s load to `to`; how many
/// clients and files it moved.
fn move_load(shared: &Shared, load: &WindowLoad, from: u32, to: u32, goal: u64) -> (usize, usize) {
    let clients = shared.registry.snapshot();
    let homed: Vec<u64> = clients.iter().filter(|c| c.home() == from).map(|c| c.id).collect();
    let (mut move_clients, move_files) = shed(load, goal, &homed);
    if move_clients.is_empty() && move_files.is_empty() {
        // The last window measured too little to choose by (a worker the
        // machine hardly scheduled is congested, not busy): half of the
        // clients at home there go, by count.
        move_clients = every_other(&homed);
    }
    let mut moved_clients = 0;
    for client in clients.iter().filter(|c| move_clients.contains(&c.id)) {
        client.set_home(to);
        moved_clients += 1;
    }
    for &file in &move_files {
        shared.placement.request_move(file, to);
    }
    shared.ring(from);
    (moved_clients, move_files.len())
}

/// Every other one of `ids` (the second, the fourth...): half, rounded
/// down, so a worker with one client keeps it.
fn every_other(ids: &[u64]) -> Vec<u64> {
    ids.iter().skip(1).step_by(2).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> LoadPolicy {
        LoadPolicy::default()
    }

    fn busy(shares: &[f64]) -> Vec<Measured> {
        shares.iter().map(|&busy| Measured { busy, congestion: 0.0 }).collect()
    }

    #[test]
    fn a_saturated_worker_asks_for_another() {
        assert_eq!(verdict(&busy(&[0.95, 0.0, 0.0]), 1, 1, 3, &policy()), Decision::Add { from: 0 });
        assert_eq!(verdict(&busy(&[0.95, 0.9, 0.95]), 3, 1, 3, &policy()), Decision::Stay, "none left to add");
    }

    #[test]
    fn a_congested_worker_asks_for_another_however_little_cpu_it_got() {
        let queued = [Measured { busy: 0.2, congestion: 1.5 }, Measured::default()];
        assert_eq!(verdict(&queued, 1, 1, 2, &policy()), Decision::Add { from: 0 });
        let load = WindowLoad { requests: 4, waiting: 6, ..WindowLoad::default() };
        assert_eq!(Measured::of(&load, 1.0).congestion, 1.5);
    }

    #[test]
    fn idle_workers_are_parked_down_to_the_minimum() {
        assert_eq!(verdict(&busy(&[0.2, 0.1, 0.0]), 3, 1, 3, &policy()), Decision::Park);
        assert_eq!(verdict(&busy(&[0.2, 0.1]), 2, 2, 3, &policy()), Decision::Stay, "at the minimum");
        assert_eq!(verdict(&busy(&[0.6, 0.5]), 2, 1, 3, &policy()), Decision::Stay, "1.1 does not fit one at 0.5");
        let queued = [Measured { busy: 0.1, congestion: 0.9 }, Measured::default()];
        assert_eq!(verdict(&queued, 2, 1, 2, &policy()), Decision::Stay, "a congested worker keeps its help");
    }

    #[test]
    fn uneven_workers_are_balanced() {
        assert_eq!(verdict(&busy(&[0.8, 0.1]), 2, 2, 2, &policy()), Decision::Balance { from: 0, to: 1 });
        assert_eq!(verdict(&busy(&[0.5, 0.3]), 2, 2, 2, &policy()), Decision::Stay);
    }

    #[test]
    fn only_agreeing_windows_act() {
        let mut a = Agreement::default();
        let add = Decision::Add { from: 0 };
        assert_eq!(a.settle(add.clone(), 3), Decision::Stay);
        assert_eq!(a.settle(add.clone(), 3), Decision::Stay);
        assert_eq!(a.settle(Decision::Park, 3), Decision::Stay, "a different verdict starts again");
        assert_eq!(a.settle(add.clone(), 3), Decision::Stay);
        assert_eq!(a.settle(add.clone(), 3), Decision::Stay);
        assert_eq!(a.settle(add.clone(), 3), add);
        assert_eq!(a.settle(add.clone(), 3), Decision::Stay, "counting starts again after acting");
    }

    #[test]
    fn the_manager_keeps_to_the_cpus_unless_told_not_to() {
        let p = policy();
        assert_eq!(manager_max(&p, 1, 6, 2), 2);
        assert_eq!(manager_max(&p, 1, 2, 8), 2);
        assert_eq!(manager_max(&p, 3, 6, 2), 3, "never below the minimum");
        let uncapped = LoadPolicy { cap_at_cpus: false, ..policy() };
        assert_eq!(manager_max(&uncapped, 1, 6, 2), 6);
    }

    #[test]
    fn an_undone_park_makes_the_next_one_wait_longer() {
        let mut b = ParkBackoff::default();
        assert_eq!(b.needed(4), 4);
        b.parked(10);
        b.added(20, 40);
        assert_eq!(b.needed(4), 8, "parked and added again within 40 windows");
        b.parked(30);
        b.added(35, 40);
        assert_eq!(b.needed(4), 16);
        b.parked(100);
        b.added(200, 40);
        assert_eq!(b.needed(4), 16, "an add long after a park undoes nothing");
        b.parked(300);
        b.tick(341, 40);
        assert_eq!(b.needed(4), 8, "a park that stood halves it");
        for w in 0..20 {
            b.parked(1000 + w * 2);
            b.added(1001 + w * 2, 40);
        }
        assert_eq!(b.needed(4), 4 * MAX_PARK_FACTOR, "bounded");
    }

    #[test]
    fn with_nothing_measured_half_the_clients_move() {
        assert_eq!(every_other(&[4, 5, 6, 7, 8]), [5, 7]);
        assert!(every_other(&[4]).is_empty(), "a lone client stays");
    }

    #[test]
    fn whole_clients_move_before_files() {
        let mut load = WindowLoad::default();
        load.add(1, None, 600);
        load.add(2, Some(70), 300);
        load.add(2, Some(71), 100);
        load.add(3, None, 0);
        // Shed 700: client 1's 600 first, then the 100 left takes file 71
        // (file 70's 300 does not fit).
        let (clients, files) = shed(&load, 700, &[1, 2, 3]);
        assert_eq!((clients, files), (vec![1], vec![71]));
        // Shed 500: client 1 does not fit, so files, hottest first.
        let (clients, files) = shed(&load, 500, &[1, 2, 3]);
        assert_eq!((clients, files), (vec![], vec![70, 71]));
        // A client with no load at its home is never moved.
        let (clients, _) = shed(&load, 10_000, &[3]);
        assert!(clients.is_empty());
    }
}
