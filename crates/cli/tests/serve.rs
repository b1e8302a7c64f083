//! `larder serve` as a process, and the store commands following a store
//! to it: while a server serves a store it holds the store's LOCK, so a
//! command that opened the store itself would fail; every command here
//! succeeds, and `stats` answers with the server's own section (its pid).
//! A second server is refused with a message that names the first; SIGTERM
//! and SIGINT stop a server with exit 0, everything it acknowledged
//! durable and its socket removed; the socket file a SIGKILLed server
//! leaves makes the commands open the store themselves, and a new server
//! replaces it.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/served.rs"]
mod served;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{fsck_clean, larder};
use larder_kv::{Kv, KvOptions};
use rustix::process::Signal;
use served::{number, server_section, Served};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `larder args` with `input` on stdin.
fn larder_with_input(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_larder"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // A command that fails early stops reading: its output says why.
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

fn new_store(dir: &Path) -> std::path::PathBuf {
    let store = dir.join("store");
    ok(larder(&["init", s(&store)]), "init");
    store
}

/// The store is held by another process: opening it here is refused.
fn assert_locked(store: &Path) {
    match Kv::open(store, KvOptions::default()) {
        Ok(kv) => {
            kv.close().unwrap();
            panic!("the store opened here while a server serves it: its LOCK is not held");
        }
        Err(e) => assert!(e.to_string().contains("LOCK") || format!("{e:?}").contains("Locked"), "{e:?}"),
    }
}

/// Bytes that differ at every position, `len` of them.
fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u64).wrapping_mul(2_654_435_761).wrapping_add(u64::from(seed)) as u8).collect()
}

#[test]
fn the_store_commands_go_to_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path());
    let server = Served::start(&store, &["--workers", "2..4"]);
    assert_locked(&store);
    let st = s(&store);

    ok(larder_with_input(&["put", st, "b/small"], b"hello"), "put from stdin");
    // Larger than one request holds inline, and larger than the streaming
    // size (a writer through the server).
    let (medium, large) = (bytes(3 << 20, 1), bytes((9 << 20) + 12_345, 2));
    ok(larder_with_input(&["put", st, "b/dir/medium"], &medium), "put of 3 MiB");
    let large_file = tmp.path().join("large");
    std::fs::write(&large_file, &large).unwrap();
    ok(larder(&["put", st, "b/dir/large", s(&large_file)]), "put of 9 MiB from a file");
    ok(larder_with_input(&["put", st, "b/buffered", "--buffered"], b"later"), "buffered put");

    assert_eq!(ok(larder(&["cat", st, "b/small"]), "cat").stdout, b"hello");
    assert_eq!(ok(larder(&["get", st, "b/dir/medium"]), "get to stdout").stdout, medium);
    let got = tmp.path().join("got");
    ok(larder(&["get", st, "b/dir/large", s(&got)]), "get to a file");
    assert!(std::fs::read(&got).unwrap() == large, "the 9 MiB value came back changed");
    let listing = String::from_utf8(ok(larder(&["ls", st, "b"]), "ls").stdout).unwrap();
    let listed: Vec<(u64, &str)> = listing
        .lines()
        .map(|l| {
            let (size, key) = l.trim().split_once("  ").unwrap();
            (size.parse().unwrap(), key.trim())
        })
        .collect();
    assert_eq!(listed, [(5, "buffered"), (large.len() as u64, "dir/large"), (3 << 20, "dir/medium"), (5, "small")]);
    assert_eq!(ok(larder(&["ls", st]), "ls of buckets").stdout, b"b\n");
    ok(larder(&["rm", st, "b/small"]), "rm");
    let gone = larder(&["cat", st, "b/small"]);
    assert!(!gone.status.success(), "a removed key still reads");

    let tree = tmp.path().join("tree");
    let mut files = Vec::new();
    for i in 0..40u8 {
        let rel = format!("d{}/f{i}.txt", i % 3);
        let content = bytes(100 + 997 * usize::from(i), i);
        std::fs::create_dir_all(tree.join(&rel).parent().unwrap()).unwrap();
        std::fs::write(tree.join(&rel), &content).unwrap();
        files.push((rel, content));
    }
    ok(larder(&["import", st, s(&tree), "imported", "--batch", "7"]), "import");
    let out = tmp.path().join("out");
    ok(larder(&["export", st, "imported", s(&out)]), "export");
    for (rel, content) in &files {
        assert!(&std::fs::read(out.join(rel)).unwrap() == content, "{rel} exported changed");
    }

    let stats = String::from_utf8(ok(larder(&["stats", st]), "stats").stdout).unwrap();
    let section = server_section(&stats);
    assert_eq!(number(&section, "pid"), u64::from(server.pid()), "stats answered by another process: {stats}");
    assert!(stats.contains("buckets:          2"), "the store's own counters are there too: {stats}");
    assert_eq!(number(&section, "clients"), 1, "only the stats command is connected: {section:?}");
    assert_eq!(number(&section, "open handles"), 0, "{section:?}");
    assert!(number(&section, "worker 0") > 0, "{section:?}");
    assert!(section.contains_key("worker 1"), "two workers run: {section:?}");
    assert_locked(&store);

    server.signal(Signal::TERM);
    let (status, stderr) = server.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}: {stderr:?}");
    let kv = Kv::open(&store, KvOptions::default()).unwrap();
    assert_eq!(kv.get("b", "small").unwrap(), None);
    assert_eq!(kv.get("b", "buffered").unwrap().as_deref(), Some(&b"later"[..]));
    assert!(kv.get("b", "dir/large").unwrap().unwrap() == large);
    assert_eq!(kv.scan_prefix("imported", b"").unwrap().count(), files.len());
    kv.close().unwrap();
    fsck_clean(&store);
}

#[test]
fn a_second_server_is_refused_with_a_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path());
    let server = Served::start(&store, &[]);
    let other_socket = tmp.path().join("other.sock");
    for extra in [&[][..], &["--socket", s(&other_socket)][..]] {
        let mut args = vec!["serve", s(&store)];
        args.extend_from_slice(extra);
        let out = larder(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "a second server ({extra:?}) was not refused: {stderr}");
        assert!(
            stderr.contains("a server already serves the store at") && stderr.contains("larder.sock"),
            "the refusal does not say a server serves it and where: {stderr}"
        );
        assert!(!other_socket.exists(), "the refused server left a socket");
    }
    // The first one is untouched.
    ok(larder_with_input(&["put", s(&store), "b/k"], b"v"), "put");
    let stats = String::from_utf8(ok(larder(&["stats", s(&store)]), "stats").stdout).unwrap();
    assert_eq!(number(&server_section(&stats), "pid"), u64::from(server.pid()));
    server.signal(Signal::TERM);
    assert!(server.wait(Duration::from_secs(60)).0.success());
}

/// SIGTERM or SIGINT: exit 0, every acknowledged write durable (buffered
/// ones too), the socket removed, connected clients told the server is gone.
fn stops_cleanly_on(signal: Signal) {
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path());
    let server = Served::start(&store, &[]);
    let socket = larder_client::socket_of(&store);
    assert!(socket.exists());
    let client = larder_client::Client::connect(&store).unwrap();
    client.create_bucket("c").unwrap();
    for i in 0..50u8 {
        client.put("c", format!("k{i}"), &bytes(usize::from(i) * 300, i), larder_client::Durability::Buffered).unwrap();
    }
    let file = client.create("/open-at-stop").unwrap();
    assert_eq!(file.write_at(b"written, not synced", 0).unwrap(), 19);
    ok(larder_with_input(&["put", s(&store), "b/k", "--buffered"], b"buffered by the CLI"), "put");

    server.signal(signal);
    let (status, stderr) = server.wait(Duration::from_secs(60));
    assert!(status.success(), "{signal:?}: exit {status}: {stderr:?}");
    assert!(
        stderr.iter().any(|l| l.contains("stopped serving") && l.contains("durable")),
        "no word that it stopped: {stderr:?}"
    );
    assert!(!socket.exists(), "the socket file is left after {signal:?}");
    let (answered, answer) = std::sync::mpsc::channel();
    let pinging = client.clone();
    std::thread::spawn(move || answered.send(pinging.ping().is_err()));
    assert_eq!(answer.recv_timeout(Duration::from_secs(5)), Ok(true), "a client still gets answers, or hangs");
    drop(file);
    drop(client);

    let kv = Kv::open(&store, KvOptions::default()).unwrap();
    for i in 0..50u8 {
        assert_eq!(kv.get("c", format!("k{i}")).unwrap(), Some(bytes(usize::from(i) * 300, i)), "c/k{i}");
    }
    assert_eq!(kv.get("b", "k").unwrap().as_deref(), Some(&b"buffered by the CLI"[..]));
    kv.close().unwrap();
    fsck_clean(&store);
}

#[test]
fn sigterm_stops_a_server_cleanly() {
    stops_cleanly_on(Signal::TERM);
}

#[test]
fn sigint_stops_a_server_cleanly() {
    stops_cleanly_on(Signal::INT);
}

#[test]
fn a_killed_servers_socket_is_left_to_the_commands_and_replaced_by_a_new_server() {
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path());
    let st = s(&store);
    let server = Served::start(&store, &[]);
    ok(larder_with_input(&["put", st, "b/durable"], b"durable"), "put");
    server.kill();
    let socket = larder_client::socket_of(&store);
    assert!(socket.exists(), "a SIGKILLed server cannot remove its socket; this test needs it left");

    // Nobody listens: the commands open (and recover) the store themselves.
    assert_eq!(ok(larder(&["cat", st, "b/durable"]), "cat after the kill").stdout, b"durable");
    ok(larder_with_input(&["put", st, "b/embedded"], b"here"), "put after the kill");
    let stats = String::from_utf8(ok(larder(&["stats", st]), "stats").stdout).unwrap();
    assert!(!stats.contains("\nserver:\n"), "stats of an unserved store has a server section: {stats}");
    assert!(socket.exists(), "the commands removed the server's socket");

    let again = Served::start(&store, &[]);
    let stats = String::from_utf8(ok(larder(&["stats", st]), "stats").stdout).unwrap();
    assert_eq!(number(&server_section(&stats), "pid"), u64::from(again.pid()), "{stats}");
    assert_eq!(ok(larder(&["cat", st, "b/embedded"]), "cat").stdout, b"here");
    assert_locked(&store);
    again.signal(Signal::TERM);
    assert!(again.wait(Duration::from_secs(60)).0.success());
    assert!(!socket.exists());
    fsck_clean(&store);
}

/// `--placement round-robin` runs the workers it is given and no load
/// manager: each new client takes the next worker as its home, `stats`
/// says the manager is off and its counts stay at zero. Over a range of
/// workers it is refused, saying why, before anything is served.
#[test]
fn a_round_robin_placement_runs_a_fixed_count_without_the_manager() {
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path());
    let st = s(&store);
    let refused = larder(&["serve", st, "--workers", "1..3", "--placement", "round-robin"]);
    assert!(!refused.status.success(), "a round-robin placement over 1..3 workers was accepted");
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("--workers N"), "the refusal does not say what to give: {why}");

    let server = Served::start(&store, &["--workers", "3", "--placement", "round-robin"]);
    for i in 0..12 {
        ok(larder_with_input(&["put", st, &format!("b/k{i}")], b"value"), "put");
    }
    let stats = String::from_utf8(ok(larder(&["stats", st]), "stats").stdout).unwrap();
    let section = server_section(&stats);
    assert_eq!(number(&section, "workers"), 3, "{section:?}");
    let manager = section.get("load manager").unwrap_or_else(|| panic!("no load manager line: {section:?}"));
    assert!(
        manager.starts_with("0 windows, 0 added, 0 parked, 0 balanced, 0 clients moved, 0 files moved"),
        "{manager}"
    );
    assert!(manager.contains("off"), "{manager}");
    for worker in 0..3 {
        assert!(
            number(&section, &format!("worker {worker}")) > 0,
            "clients did not take the workers in turn: {section:?}"
        );
    }
    server.signal(Signal::TERM);
    let (status, stderr) = server.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}: {stderr:?}");
}

/// `--max-open-handles` is each client's limit of open handles: one more
/// open is EMFILE; 0 is refused before anything is served.
#[test]
fn max_open_handles_limits_each_clients_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path());
    let st = s(&store);
    let refused = larder(&["serve", st, "--max-open-handles", "0"]);
    assert!(!refused.status.success(), "--max-open-handles 0 was accepted");

    let server = Served::start(&store, &["--max-open-handles", "3"]);
    let client = larder_client::Client::connect_socket_with(&larder_client::socket_of(&store), false).unwrap();
    for i in 0..4 {
        client.write(format!("/f{i}"), b"x").unwrap();
    }
    let open: Vec<larder_client::File> = (0..3).map(|i| client.open(format!("/f{i}")).unwrap()).collect();
    let fourth = client.open("/f3").err().map(|e| e.errno());
    assert_eq!(fourth, Some(libc::EMFILE), "a fourth open of a client limited to 3");
    drop(open);
    server.signal(Signal::TERM);
    let (status, stderr) = server.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}: {stderr:?}");
}
