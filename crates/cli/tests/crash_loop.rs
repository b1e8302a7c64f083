//! The crash loop: real processes killed with SIGKILL at random moments,
//! cycle after cycle on one store per workload, each kill followed by a
//! check that the store opens, holds every acknowledged key or fsynced
//! file with its bytes (and for a step in flight, its state before or
//! after, never a mix), and that `larder fsck` exits 0.
//!
//! Workloads: `larder import` of a generated tree that changes every cycle
//! (a key printed `durable` is acknowledged), the hidden `larder
//! crash-writer kv` (durable puts, deletes and batches on three threads),
//! and `crash-writer files` on a `larder mount` (files created, replaced,
//! appended to, truncated, renamed and unlinked, each step fsynced), where
//! the mount process is killed too.
//!
//! A kill comes after a random number of acknowledgements plus a random
//! few milliseconds, or at a random deadline, whichever is first; the
//! writers' deadlines count from their first line three times in four and
//! otherwise from the spawn (so some kills land in the store's open and
//! recovery), the import's from the spawn.
//! `LARDER_CRASH_CYCLES` sets the cycles of each workload (default 3) and
//! `LARDER_CRASH_SEED` the seed of every choice (printed; the moments of
//! the kills still depend on timing).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use common::steps::{steps, Effects};
use common::{fsck_clean, fuse_available, is_mounted, larder, Mount};
use larder_kv::{Kv, KvOptions};

/// Cycles of each workload and the seed of the run, announced.
fn config(workload: &str) -> (usize, u64) {
    let cycles = std::env::var("LARDER_CRASH_CYCLES").map_or(3, |v| v.parse().expect("LARDER_CRASH_CYCLES: a number"));
    let seed = std::env::var("LARDER_CRASH_SEED").map_or_else(
        |_| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64,
        |v| v.parse().expect("LARDER_CRASH_SEED: a number"),
    );
    eprintln!("{workload} crash loop: {cycles} cycles, LARDER_CRASH_SEED={seed}");
    (cycles, seed)
}

#[path = "../src/crash_pattern.rs"]
mod crash_pattern;
use crash_pattern::{pattern, Rng};

/// Spawns `larder args` with its stdout's complete lines on a channel (a
/// line cut by a kill promises nothing and is dropped).
fn spawn(args: &[&str]) -> (Child, Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_larder"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = out;
        let mut line = String::new();
        loop {
            line.clear();
            match out.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => match line.strip_suffix('\n') {
                    Some(l) => {
                        if tx.send(l.to_string()).is_err() {
                            return;
                        }
                    }
                    None => return,
                },
            }
        }
    });
    (child, rx)
}

/// Where the random deadline of [`until_kill`] is counted from.
#[derive(Clone, Copy, Debug)]
enum Clock {
    /// The spawn: the kill may come while the child opens (and recovers)
    /// the store.
    Spawn,
    /// The child's first line: the kill comes once it writes.
    FirstLine,
}

/// A [`Clock`] that counts from the spawn one time in four.
fn clock(rng: &mut Rng) -> Clock {
    if rng.below(4) == 0 {
        Clock::Spawn
    } else {
        Clock::FirstLine
    }
}

/// Longest wait for a child's first line under [`Clock::FirstLine`].
const FIRST_LINE_WITHIN: Duration = Duration::from_secs(120);

/// Collects `lines` until `enough` of them satisfy `counts`, then a random
/// 0-15 ms more, or until a random deadline of up to `longest` counted from
/// `clock`, whichever comes first (or until the child's stdout closes);
/// returns the lines and whether the output ended on its own.
fn until_kill(
    lines: &Receiver<String>,
    rng: &mut Rng,
    clock: Clock,
    enough: u64,
    longest: Duration,
    counts: impl Fn(&str) -> bool,
) -> (Vec<String>, bool) {
    let random = Duration::from_micros(rng.below(longest.as_micros() as u64 + 1));
    let mut deadline = match clock {
        Clock::Spawn => Instant::now() + random,
        Clock::FirstLine => Instant::now() + FIRST_LINE_WITHIN,
    };
    let (mut got, mut seen, mut extended) = (Vec::new(), 0, false);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return (got, false);
        }
        match lines.recv_timeout(deadline - now) {
            Ok(l) => {
                if got.is_empty() && matches!(clock, Clock::FirstLine) {
                    deadline = Instant::now() + random;
                }
                if counts(&l) {
                    seen += 1;
                }
                got.push(l);
                if seen >= enough && !extended {
                    extended = true;
                    deadline = deadline.min(Instant::now() + Duration::from_micros(rng.below(15_000)));
                }
            }
            Err(RecvTimeoutError::Timeout) => return (got, false),
            Err(RecvTimeoutError::Disconnected) => return (got, true),
        }
    }
}

/// Kills `child` with SIGKILL (unless it has exited) and waits for it;
/// returns every line it printed after `got`.
fn kill_and_drain(child: &mut Child, lines: &Receiver<String>, mut got: Vec<String>) -> Vec<String> {
    let _ = child.kill();
    child.wait().unwrap();
    got.extend(lines.iter());
    got
}

/// Splits an effect `kind:a:b:...` into its kind and fields.
fn fields(effect: &str) -> (&str, Vec<&str>) {
    let mut parts = effect.split(':');
    (parts.next().unwrap(), parts.collect())
}

/// A store's contents: key or path to bytes.
type State = BTreeMap<String, Vec<u8>>;

/// `state` with a KV step applied.
fn apply_kv(state: &State, effects: &Effects) -> State {
    let mut next = state.clone();
    for e in effects {
        match fields(e) {
            ("put", f) => {
                next.insert(f[0].to_string(), pattern(f[1].parse().unwrap(), f[2].parse().unwrap()));
            }
            ("del", f) => {
                next.remove(f[0]);
            }
            other => panic!("unknown kv effect {other:?}"),
        }
    }
    next
}

/// The keys a KV step touches.
fn kv_keys(effects: &Effects) -> BTreeSet<String> {
    effects.iter().map(|e| fields(e).1[0].to_string()).collect()
}

/// Whether `actual` and `want` agree on `keys`.
fn agree(actual: &State, want: &State, keys: &BTreeSet<String>) -> bool {
    keys.iter().all(|k| actual.get(k) == want.get(k))
}

/// Describes how `actual` differs from `want`, keys in `skip` aside.
fn differences(actual: &State, want: &State, skip: &BTreeSet<String>) -> Vec<String> {
    let keys: BTreeSet<&String> = actual.keys().chain(want.keys()).collect();
    let show = |v: Option<&Vec<u8>>| v.map_or("absent".to_string(), |v| format!("{} bytes", v.len()));
    keys.into_iter()
        .filter(|k| !skip.contains(*k) && actual.get(*k) != want.get(*k))
        .map(|k| format!("{k}: want {}, found {}", show(want.get(k)), show(actual.get(k))))
        .collect()
}

/// Every key of `bucket` with its bytes.
fn kv_state(kv: &Kv, bucket: &str) -> State {
    let mut state = State::new();
    for e in kv.scan_prefix(bucket, b"").unwrap() {
        let key = String::from_utf8(e.unwrap().key).unwrap();
        let value = kv.get(bucket, &key).unwrap().unwrap_or_else(|| panic!("{key} is listed and has no value"));
        state.insert(key, value);
    }
    state
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A new store under `dir` with an empty `bucket`.
fn new_store(dir: &Path, bucket: &str) -> PathBuf {
    let store = dir.join("store");
    assert!(larder(&["init", s(&store)]).status.success());
    let kv = Kv::open(&store, KvOptions::default()).unwrap();
    kv.create_bucket(bucket).unwrap();
    kv.close().unwrap();
    store
}

#[test]
fn a_killed_kv_writer_loses_no_acknowledged_key() {
    let (cycles, seed) = config("kv writer");
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path(), "b");
    let mut state = State::new();
    for cycle in 0..cycles {
        let writer_seed = rng.next().to_string();
        let (mut child, lines) =
            spawn(&["crash-writer", "--seed", &writer_seed, "--threads", "3", "kv", s(&store), "b"]);
        let (clock, enough) = (clock(&mut rng), 1 + rng.below(100));
        let (got, ended) =
            until_kill(&lines, &mut rng, clock, enough, Duration::from_secs(2), |l| l.starts_with("ack "));
        assert!(!ended, "cycle {cycle}: the writer stopped by itself: {:?}", child.wait());
        let got = kill_and_drain(&mut child, &lines, got);
        let steps = steps(&got);
        let mut want = state.clone();
        for (_, effects) in &steps.acked {
            want = apply_kv(&want, effects);
        }
        let kv = Kv::open(&store, KvOptions::default()).unwrap();
        let actual = kv_state(&kv, "b");
        kv.close().unwrap();
        let mut in_flight = BTreeSet::new();
        for (_, effects) in &steps.pending {
            let keys = kv_keys(effects);
            let after = apply_kv(&want, effects);
            assert!(
                agree(&actual, &want, &keys) || agree(&actual, &after, &keys),
                "cycle {cycle} (writer seed {writer_seed}): the step in flight {effects:?} is neither before nor \
                 after: {:?}",
                differences(&actual, &after, &BTreeSet::new())
            );
            in_flight.extend(keys);
        }
        let wrong = differences(&actual, &want, &in_flight);
        assert!(wrong.is_empty(), "cycle {cycle} (writer seed {writer_seed}): acknowledged state lost: {wrong:?}");
        fsck_clean(&store);
        eprintln!(
            "kv cycle {cycle}: writer seed {writer_seed}, killed after {} acknowledged steps (deadline from the \
             {clock:?}), {} keys checked",
            steps.acked.len(),
            actual.len()
        );
        state = actual;
    }
}

/// Writes `files` new or changed files into `tree` (and `state`): small
/// ones in nested directories, now and then one above the streaming size.
fn change_tree(tree: &Path, state: &mut State, rng: &mut Rng, files: u64) {
    for _ in 0..files {
        let i = rng.below(1200);
        let key = format!("d{:02}/s{}/file{i:04}.txt", i % 17, i % 3);
        let len = if rng.below(300) == 0 { (9 << 20) + rng.below(1 << 20) } else { rng.below(12_000) };
        let value = pattern(len as usize, rng.next());
        let path = tree.join(&key);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &value).unwrap();
        state.insert(key, value);
    }
}

#[test]
fn a_killed_import_loses_no_key_it_reported_durable() {
    let (cycles, seed) = config("import");
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path(), "b");
    let tree = tmp.path().join("tree");
    let (mut source, mut stored) = (State::new(), State::new());
    change_tree(&tree, &mut source, &mut rng, 600);
    for cycle in 0..cycles {
        let changed = 30 + rng.below(120);
        change_tree(&tree, &mut source, &mut rng, changed);
        let batch = 10 + rng.below(150);
        let batches = (source.len() as u64).div_ceil(batch);
        let (mut child, lines) = spawn(&["import", s(&store), s(&tree), "b", "--batch", &batch.to_string()]);
        let enough = 1 + rng.below(batches);
        let (got, ended) =
            until_kill(&lines, &mut rng, Clock::Spawn, enough, Duration::from_secs(3), |l| l.starts_with("batch "));
        let finished = ended && child.wait().unwrap().success();
        let got = kill_and_drain(&mut child, &lines, got);
        let durable: BTreeSet<String> =
            got.iter().filter_map(|l| l.strip_prefix("durable ")).map(str::to_string).collect();
        if finished {
            assert_eq!(durable.len(), source.len(), "cycle {cycle}: a finished import reported every key");
        }
        let kv = Kv::open(&store, KvOptions::default()).unwrap();
        let actual = kv_state(&kv, "b");
        kv.close().unwrap();
        for (key, value) in &actual {
            let new = source.get(key).unwrap_or_else(|| panic!("cycle {cycle}: {key} was never in the tree"));
            if durable.contains(key) {
                assert!(value == new, "cycle {cycle}: {key} was reported durable, holds {} bytes", value.len());
            } else {
                assert!(
                    value == new || stored.get(key) == Some(value),
                    "cycle {cycle}: {key} holds {} bytes, neither its old value nor its new",
                    value.len()
                );
            }
        }
        for key in durable.iter().chain(stored.keys()) {
            assert!(actual.contains_key(key), "cycle {cycle}: {key} is lost");
        }
        fsck_clean(&store);
        eprintln!(
            "import cycle {cycle}: batches of {batch}, killed after {} of {} keys reported durable{}",
            durable.len(),
            source.len(),
            if finished { " (finished first)" } else { "" }
        );
        stored = actual;
    }
}

/// `state` with one files step of thread `t` applied; with `partial`, an
/// interrupted `new` or `append` that kept `partial` bytes of what it added.
fn apply_file(state: &State, t: u64, effect: &str, partial: Option<usize>) -> State {
    let mut next = state.clone();
    let (kind, f) = fields(effect);
    let path = |name: &str| format!("t{t}/{name}");
    let value = |len: &str, seed: &str| {
        let mut v = pattern(len.parse().unwrap(), seed.parse().unwrap());
        v.truncate(partial.unwrap_or(usize::MAX));
        v
    };
    match kind {
        "new" | "replace" => {
            next.insert(path(f[0]), value(f[1], f[2]));
        }
        "append" => next.entry(path(f[0])).or_default().extend(value(f[1], f[2])),
        "truncate" => next.entry(path(f[0])).or_default().truncate(f[1].parse().unwrap()),
        "rename" => {
            if let Some(v) = next.remove(&path(f[0])) {
                next.insert(path(f[1]), v);
            }
        }
        "unlink" => {
            next.remove(&path(f[0]));
        }
        other => panic!("unknown files effect {other}"),
    }
    next
}

/// The paths a files step touches.
fn file_paths(t: u64, effect: &str) -> BTreeSet<String> {
    let (kind, f) = fields(effect);
    let names = if kind == "rename" { &f[..2] } else { &f[..1] };
    names.iter().map(|n| format!("t{t}/{n}")).collect()
}

/// Every file under `dir` (`tTHREAD/NAME`) with its bytes, `.tmp` files
/// of interrupted replaces aside.
fn files_state(dir: &Path) -> State {
    let mut state = State::new();
    let Ok(threads) = fs::read_dir(dir) else { return state };
    for t in threads {
        let t = t.unwrap();
        for f in fs::read_dir(t.path()).unwrap() {
            let f = f.unwrap();
            let name = f.file_name().into_string().unwrap();
            if !name.ends_with(".tmp") {
                let key = format!("{}/{name}", t.file_name().into_string().unwrap());
                state.insert(key, fs::read(f.path()).unwrap());
            }
        }
    }
    state
}

#[test]
fn a_killed_mount_and_writer_lose_no_fsynced_file() {
    if !fuse_available() {
        return;
    }
    let (cycles, seed) = config("mount writer");
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    let (store, mnt) = common::fresh_store(tmp.path());
    let work = mnt.join("w");
    let mut state = State::new();
    let mut mount = Mount::start(&store, &mnt, &[]);
    for cycle in 0..cycles {
        let writer_seed = rng.next().to_string();
        let (mut writer, lines) = spawn(&["crash-writer", "--seed", &writer_seed, "--threads", "2", "files", s(&work)]);
        let (clock, enough) = (clock(&mut rng), 1 + rng.below(40));
        let (got, ended) =
            until_kill(&lines, &mut rng, clock, enough, Duration::from_secs(3), |l| l.starts_with("ack "));
        assert!(!ended, "cycle {cycle}: the writer stopped by itself: {:?}", writer.wait());
        let mount_first = rng.below(2) == 0;
        if mount_first {
            mount.child.kill().unwrap();
        }
        let got = kill_and_drain(&mut writer, &lines, got);
        let _ = mount.child.kill();
        mount.child.wait().unwrap();
        assert!(Command::new("fusermount3").arg("-u").arg("-z").arg(&mnt).status().unwrap().success());
        assert!(!is_mounted(&mnt));
        drop(mount);
        fsck_clean(&store);
        mount = Mount::start(&store, &mnt, &[]);
        let steps = steps(&got);
        let mut want = state.clone();
        for (t, effects) in &steps.acked {
            want = apply_file(&want, *t, &effects[0], None);
        }
        let actual = files_state(&work);
        let mut in_flight = BTreeSet::new();
        for (t, effects) in &steps.pending {
            let effect = &effects[0];
            let paths = file_paths(*t, effect);
            let (kind, f) = fields(effect);
            let kept = |p: &str| actual.get(p).map_or(0, Vec::len).saturating_sub(want.get(p).map_or(0, Vec::len));
            let after = match kind {
                "new" | "append" => apply_file(&want, *t, effect, Some(kept(&format!("t{t}/{}", f[0])))),
                _ => apply_file(&want, *t, effect, None),
            };
            let before_ok = agree(&actual, &want, &paths);
            assert!(
                before_ok || agree(&actual, &after, &paths),
                "cycle {cycle} (writer seed {writer_seed}, mount killed {}): the step in flight {effect} of thread \
                 {t} is neither before nor after: {:?}",
                if mount_first { "first" } else { "second" },
                differences(&actual, &after, &BTreeSet::new())
            );
            in_flight.extend(paths);
        }
        let wrong = differences(&actual, &want, &in_flight);
        assert!(wrong.is_empty(), "cycle {cycle} (writer seed {writer_seed}): fsynced state lost: {wrong:?}");
        eprintln!(
            "mount cycle {cycle}: writer seed {writer_seed}, {} killed first after {} fsynced steps (deadline from \
             the {clock:?}), {} files checked",
            if mount_first { "mount" } else { "writer" },
            steps.acked.len(),
            actual.len()
        );
        state = actual;
    }
    mount.stop();
    fsck_clean(&store);
}
