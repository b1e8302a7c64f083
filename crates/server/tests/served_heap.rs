//! Served heaps (docs/heap.md, "Sharing between processes"): clients map
//! objects from descriptors the server sends by SCM_RIGHTS, and every
//! metadata change is a request the server executes and logs.
//!
//! Tests that need other processes re-execute this test binary with
//! `LARDER_HEAP_CHILD` naming the role (and `LARDER_HEAP_SOCKET` the
//! server's socket); the child's assertions fail its exit status, which
//! the parent checks.
#![allow(clippy::unwrap_used)]

mod serving;

use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use larder_client::{Client, ClientError, HeapPointer, RemoteHeap};
use larder_protocol::descriptor::receive_descriptor;
use larder_protocol::message::{HeapOperation, Request, Response};
use larder_server::Limits;
use serving::{limits, serve, serve_with, PATIENCE};

const CHILD_ENV: &str = "LARDER_HEAP_CHILD";
const SOCKET_ENV: &str = "LARDER_HEAP_SOCKET";
const INDEX_ENV: &str = "LARDER_HEAP_INDEX";

/// A uid that is neither root nor the objects' owner.
const READER_UID: u32 = 41_201;

/// Racing child processes, and rounds each plays.
const RACERS: usize = 3;
const ROUNDS: u64 = 60;
/// Bytes of each racer's object.
const OBJECT_BYTES: usize = 256;

/// This process's role, if it is a child.
fn role() -> Option<String> {
    std::env::var(CHILD_ENV).ok()
}

/// Runs this test binary's test `test` as a child with `role`.
fn child(test: &str, role: &str, socket: &std::path::Path, index: usize, uid: Option<u32>) -> std::process::Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, role)
        .env(SOCKET_ENV, socket)
        .env(INDEX_ENV, index.to_string())
        .stdout(Stdio::piped());
    if let Some(uid) = uid {
        use std::os::unix::process::CommandExt;
        command.uid(uid).gid(uid);
    }
    command.spawn().unwrap()
}

/// Waits for `child`; panics unless it succeeded. Its stdout.
fn finished(child: std::process::Child, what: &str) -> String {
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{what} failed ({}): {stdout}", output.status);
    stdout
}

fn child_client() -> Client {
    Client::connect_socket(std::path::Path::new(&std::env::var(SOCKET_ENV).unwrap())).unwrap()
}

fn index() -> u64 {
    std::env::var(INDEX_ENV).unwrap().parse().unwrap()
}

/// The bytes a racer writes into its object in `round`: a header (round,
/// racer, object) and a body derived from it, so a reader can tell a
/// whole object from a half-made one.
fn racer_bytes(round: u64, racer: u64, object: u64) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(OBJECT_BYTES);
    for word in [round, racer, object] {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    let mut x = round.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ racer.wrapping_mul(31) ^ object;
    while bytes.len() < OBJECT_BYTES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.push(x as u8);
    }
    bytes
}

/// Checks that `bytes` are whole: what `racer_bytes` makes for the
/// header they carry, and of this round and object.
fn assert_whole(bytes: &[u8], round: u64, object: u64) {
    let word = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
    assert_eq!(word(0), round, "an object named in round {round} carries round {}", word(0));
    assert_eq!(word(2), object, "object {object} carries the id {}", word(2));
    assert_eq!(bytes, racer_bytes(round, word(1), object), "object {object} is half-made");
}

#[test]
fn objects_are_shared_between_processes_without_sync() {
    if role().is_some() {
        // The second process: attaches by name and reads, then writes for
        // the first to see.
        let client = child_client();
        let heap = client.heap("/shared").unwrap();
        let object = heap.get(heap.get_by_name("greeting").unwrap()).unwrap();
        assert_eq!(heap.size(object).unwrap(), 8192);
        let mut buf = vec![0u8; 8192];
        heap.read_at(object, 0, &mut buf).unwrap();
        assert_eq!(&buf[..5], b"hello");
        assert_eq!(&buf[8000..8005], b"world");
        assert!(buf[5..8000].iter().all(|&b| b == 0));
        heap.write_at(object, 100, b"from the child").unwrap();
        return;
    }
    let t = serve();
    let client = t.client();
    let heap = client.heap("/shared").unwrap();
    let object = heap.alloc(8192).unwrap();
    assert!(heap.is_writable(object).unwrap());
    heap.add_name(object, "greeting").unwrap();
    assert_eq!(heap.names(object).unwrap(), vec!["greeting".to_string()]);
    // Written through the raw address and through write_at.
    let base = heap.pointer(object).unwrap();
    #[allow(unsafe_code)]
    // SAFETY: the object is 8,192 bytes, mapped writable; 5 bytes at 0.
    unsafe {
        std::ptr::copy_nonoverlapping(b"hello".as_ptr(), base, 5);
    }
    heap.write_at(object, 8000, b"world").unwrap();
    let reader = child("objects_are_shared_between_processes_without_sync", "reader", &t.socket(), 0, None);
    finished(reader, "the reading process");
    // The child's write is in this process's mapping, no sync between.
    let mut buf = [0u8; 14];
    heap.read_at(object, 100, &mut buf).unwrap();
    assert_eq!(&buf, b"from the child");
    // No descriptor is kept per object: the heap file is not among this
    // process's open files.
    let file = t.store.join("heap").join(object.to_string());
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        if let Ok(target) = std::fs::read_link(entry.unwrap().path()) {
            assert_ne!(target, file, "a descriptor of the object is kept open");
        }
    }
    heap.sync().unwrap();
    assert_eq!(&std::fs::read(&file).unwrap()[..5], b"hello");
}

#[test]
fn a_reader_maps_read_only_and_its_writes_are_refused() {
    if role().is_some() {
        let client = child_client();
        let heap = client.heap("/guarded").unwrap();
        let object = heap.get(heap.get_by_name("notice").unwrap()).unwrap();
        assert!(!heap.is_writable(object).unwrap(), "mapped writable for a uid that may only read");
        let mut buf = [0u8; 6];
        heap.read_at(object, 0, &mut buf).unwrap();
        assert_eq!(&buf, b"public");
        // The mapping of the object's file is read-only and shared.
        let base = heap.pointer(object).unwrap() as usize;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|line| {
                let range = line.split(' ').next().unwrap();
                let (start, end) = range.split_once('-').unwrap();
                usize::from_str_radix(start, 16).unwrap() <= base && base < usize::from_str_radix(end, 16).unwrap()
            })
            .unwrap();
        let permissions = line.split(' ').nth(1).unwrap();
        assert_eq!(permissions, "r--s", "mapping of the object: {line}");
        assert!(line.ends_with(&format!("/heap/{object}")), "not the object's file: {line}");
        assert_eq!(heap.write_at(object, 0, b"x").unwrap_err().errno(), libc::EACCES);
        // Requests that would change it are refused by the server.
        assert_eq!(heap.grow(object, 8192).unwrap_err().errno(), libc::EACCES);
        assert_eq!(heap.free(object).unwrap_err().errno(), libc::EACCES);
        assert_eq!(heap.add_name(object, "mine").unwrap_err().errno(), libc::EACCES);
        assert_eq!(heap.get_by_name("mine").unwrap_err().errno(), libc::ENOENT);
        println!("read-only checks done");
        return;
    }
    if rustix::process::geteuid().as_raw() != 0 {
        assert!(std::env::var("LARDER_SKIP_ROOT").is_ok(), "needs root (to run a reader as another uid)");
        return;
    }
    let t = serve();
    // The reader must reach the socket.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(t.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let client = t.client();
    let heap = client.heap("/guarded").unwrap();
    let object = heap.alloc(4096).unwrap();
    heap.write_at(object, 0, b"public").unwrap();
    heap.add_name(object, "notice").unwrap();
    let reader =
        child("a_reader_maps_read_only_and_its_writes_are_refused", "reader", &t.socket(), 0, Some(READER_UID));
    let out = finished(reader, "the reader");
    assert!(out.contains("read-only checks done"), "the reader did not run its checks: {out}");
    assert_eq!(heap.size(object).unwrap(), 4096);
    assert_eq!(heap.names(object).unwrap(), vec!["notice".to_string()]);
}

/// The words racers share in the control object: per racer, the rounds
/// it finished trying to name.
fn tried(heap: &RemoteHeap, control: u64, racer: u64) -> &AtomicU64 {
    let pointer = heap.deref::<AtomicU64>(HeapPointer { object: control, offset: racer * 8, generation: 0 }).unwrap();
    #[allow(unsafe_code)]
    // SAFETY: `deref` checked that an aligned AtomicU64 at this offset lies
    // inside the object, which stays mapped (never closed or freed) while
    // the racer runs; the word is only used atomically, by every process.
    unsafe {
        &*pointer
    }
}

/// Looks `name` up as a racer does: not there, or a whole object.
fn look(heap: &RemoteHeap, name: &str, round: u64) -> bool {
    let object = match heap.get_by_name(name) {
        Ok(object) => object,
        Err(e) if e.errno() == libc::ENOENT => return false,
        Err(e) => panic!("get_by_name({name}): {e}"),
    };
    match heap.get(object) {
        Ok(_) => {
            let mut bytes = vec![0u8; OBJECT_BYTES];
            heap.read_at(object, 0, &mut bytes).unwrap();
            assert_whole(&bytes, round, object);
            heap.close_object(object).unwrap();
            true
        }
        // Freed between the look-up and the attach.
        Err(e) if e.errno() == libc::ENOENT => false,
        Err(e) => panic!("attach {object}: {e}"),
    }
}

fn race(racer: u64) {
    let client = child_client();
    let heap = client.heap("/race").unwrap();
    let control = heap.get(heap.get_by_name("control").unwrap()).unwrap();
    let words: Vec<&AtomicU64> = (0..RACERS as u64).map(|r| tried(&heap, control, r)).collect();
    for round in 0..ROUNDS {
        let name = format!("contested-{round}");
        look(&heap, &name, round);
        let object = heap.alloc(OBJECT_BYTES as u64).unwrap();
        heap.write_at(object, 0, &racer_bytes(round, racer, object)).unwrap();
        let won = match heap.add_name(object, &name) {
            Ok(()) => true,
            Err(e) if e.errno() == libc::EEXIST => false,
            Err(e) => panic!("add_name: {e}"),
        };
        words[racer as usize].store(round + 1, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(30);
        if won {
            println!("won {round}");
            // Every racer tried while the name was taken: then free it,
            // racing the others' look-ups.
            while words.iter().any(|word| word.load(Ordering::Acquire) <= round) {
                assert!(Instant::now() < deadline, "round {round}: racers did not all try");
                std::thread::yield_now();
            }
            heap.free(object).unwrap();
        } else {
            heap.free(object).unwrap();
            // Look until the winner freed it.
            while look(&heap, &name, round) {
                assert!(Instant::now() < deadline, "round {round}: the winner never freed the name");
            }
        }
    }
    drop(words);
    // mfclose: syncs, so the files of the objects it freed go.
    heap.close().unwrap();
}

#[test]
fn racing_processes_one_winner_per_round_nothing_torn() {
    if role().is_some() {
        race(index());
        return;
    }
    let t = serve_with(limits(1..=2));
    let client = t.client();
    let heap = client.heap("/race").unwrap();
    let control = heap.alloc(4096).unwrap();
    heap.add_name(control, "control").unwrap();
    let racers: Vec<_> = (0..RACERS)
        .map(|i| child("racing_processes_one_winner_per_round_nothing_torn", "racer", &t.socket(), i, None))
        .collect();
    let mut wins = vec![0u32; ROUNDS as usize];
    for (i, racer) in racers.into_iter().enumerate() {
        let out = finished(racer, &format!("racer {i}"));
        for line in out.lines() {
            // libtest's "test NAME ... " may start the first line.
            if let Some(at) = line.find("won ") {
                wins[line[at + 4..].trim().parse::<usize>().unwrap()] += 1;
            }
        }
    }
    for (round, count) in wins.iter().enumerate() {
        assert_eq!(*count, 1, "round {round} had {count} winners");
    }
    // Every racer's objects were freed: the control object is all that is left.
    for round in 0..ROUNDS {
        assert_eq!(heap.get_by_name(&format!("contested-{round}")).unwrap_err().errno(), libc::ENOENT);
    }
    heap.sync().unwrap();
    let files = std::fs::read_dir(t.store.join("heap")).unwrap().count();
    assert_eq!(files, 1, "heap files left besides the control object");
}

#[test]
fn a_bad_heap_request_drops_only_its_client() {
    let t = serve();
    let good = t.client();
    let heap = good.heap("/h").unwrap();
    let object = heap.alloc(64).unwrap();
    heap.write_at(object, 0, b"kept").unwrap();

    // Claims descriptors it was never sent.
    let raw = t.raw();
    let Response::Handle(h) = raw.call_owner(&Request::HeapOpen { path: b"/h".to_vec() }) else { panic!() };
    let attach = HeapOperation::Attach { object, write: true, tag: 1, received: 5 };
    let id = raw.id();
    raw.send_as(0, id, &Request::Heap { heap: h, operation: attach });
    assert!(raw.dropped_within(PATIENCE), "a client lying about descriptors was not dropped");

    // An operation tag no decoder knows.
    let raw = t.raw();
    let mut record = Vec::new();
    larder_protocol::codec::encode_request(9, &Request::Heap { heap: 1, operation: HeapOperation::Sync }, &mut record);
    *record.last_mut().unwrap() = 200;
    raw.send_record(0, &record);
    assert!(raw.dropped_within(PATIENCE), "a client sending an unknown heap operation was not dropped");

    let mut buf = [0u8; 4];
    heap.read_at(object, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"kept");
    assert_eq!(heap.get(object).unwrap(), object);
    assert_eq!(heap.size(object).unwrap(), 64);
}

#[test]
fn attach_sends_a_read_write_or_read_only_descriptor_and_keeps_limits() {
    let t = serve_with(serving::limits(1..=1));
    let raw = t.raw();
    let Response::Handle(h) = raw.call_owner(&Request::HeapOpen { path: b"/d".to_vec() }) else { panic!() };
    let Response::HeapObject(object) =
        raw.call_owner(&Request::Heap { heap: h, operation: HeapOperation::Alloc { size: 100 } })
    else {
        panic!()
    };
    for (tag, write) in [(11u64, true), (12, false)] {
        let received = tag - 11;
        let operation = HeapOperation::Attach { object, write, tag, received };
        assert_eq!(
            raw.call_owner(&Request::Heap { heap: h, operation }),
            Response::HeapAttached { object, size: 100, writable: write }
        );
        let (got, fd) = receive_descriptor(&raw.stream, PATIENCE).unwrap();
        assert_eq!(got, tag);
        let flags = rustix::fs::fcntl_getfl(&fd).unwrap();
        let mode = flags & rustix::fs::OFlags::RWMODE;
        assert_eq!(mode, if write { rustix::fs::OFlags::RDWR } else { rustix::fs::OFlags::RDONLY });
        assert!(fd.as_raw_fd() >= 0);
    }
    // Descriptors not taken are bounded: the limit is 64 by default.
    let mut refused = None;
    for n in 0..100u64 {
        let operation = HeapOperation::Attach { object, write: false, tag: 100 + n, received: 2 };
        match raw.call_owner(&Request::Heap { heap: h, operation }) {
            Response::HeapAttached { .. } => {}
            Response::Error { errno, .. } => {
                refused = Some((n, errno));
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(refused, Some((64, libc::EAGAIN)));
    // Heaps per session are bounded too.
    let mut opened = 1;
    let errno = loop {
        match raw.call_owner(&Request::HeapOpen { path: b"/d".to_vec() }) {
            Response::Handle(_) => opened += 1,
            Response::Error { errno, .. } => break errno,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!((opened, errno), (64, libc::EMFILE));
    assert!(matches!(
        raw.call_owner(&Request::Heap { heap: 999, operation: HeapOperation::Sync }),
        Response::Error { errno: libc::EBADF, .. }
    ));
}

#[test]
fn a_stopped_server_leaves_mappings_valid_and_calls_fail() {
    let mut t = serve();
    let client = t.client();
    let heap = client.heap("/h").unwrap();
    let object = heap.alloc(4096).unwrap();
    heap.write_at(object, 0, b"still here").unwrap();
    heap.add_name(object, "n").unwrap();
    t.shutdown();
    // The mapping is of the file: it stays valid.
    let mut buf = [0u8; 10];
    heap.read_at(object, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"still here");
    heap.write_at(object, 20, b"after").unwrap();
    match heap.get_by_name("n") {
        Err(ClientError::ServerGone) => {}
        other => panic!("expected ServerGone, got {other:?}"),
    }
}

#[test]
fn grow_keeps_the_base_and_another_client_sees_the_growth() {
    let t = serve();
    let a = t.client();
    let b = t.client();
    let heap_a = a.heap("/g").unwrap();
    let heap_b = b.heap("/g").unwrap();
    let object = heap_a.alloc(4096).unwrap();
    let base = heap_a.pointer(object).unwrap();
    heap_b.get(object).unwrap();
    heap_a.grow(object, 3 * 4096).unwrap();
    assert_eq!(heap_a.pointer(object).unwrap(), base, "a growth inside the reservation moved the base");
    heap_a.write_at(object, 2 * 4096, b"grown").unwrap();
    assert_eq!(heap_b.size(object).unwrap(), 4096, "b has not looked again");
    heap_b.get(object).unwrap();
    let mut buf = [0u8; 5];
    heap_b.read_at(object, 2 * 4096, &mut buf).unwrap();
    assert_eq!(&buf, b"grown");
    assert_eq!(heap_a.grow(object, 10).unwrap_err().errno(), libc::EINVAL, "objects never shrink");
    // Types, copies and pointers checks through the server.
    let type_id = heap_a.alloc_type(&[0]).unwrap();
    heap_a.attach_type(object, type_id).unwrap();
    assert_eq!(heap_b.type_of(object).unwrap(), Some(type_id));
    let copy = heap_a.copy(object).unwrap();
    heap_b.get(copy).unwrap();
    heap_b.read_at(copy, 2 * 4096, &mut buf).unwrap();
    assert_eq!(&buf, b"grown");
    let pointer = heap_a.nptr(object).unwrap();
    let word = heap_b.deref::<u64>(HeapPointer { offset: 8, ..pointer }).unwrap();
    assert!(!word.is_null());
    let past = HeapPointer { offset: 3 * 4096, ..pointer };
    assert_eq!(heap_b.deref::<u64>(past).unwrap_err().errno(), libc::ERANGE);
    let stale = HeapPointer { generation: 5, ..pointer };
    assert_eq!(heap_b.deref::<u64>(stale).unwrap_err().errno(), libc::ESTALE);
    heap_a.free(object).unwrap();
    assert_eq!(heap_b.deref::<u64>(pointer).unwrap_err().errno(), libc::ENOENT);
    heap_a.close().unwrap();
    heap_b.close().unwrap();
}

#[test]
fn threads_of_one_client_attach_at_once_and_each_gets_its_descriptor() {
    let t = serve_with(limits(1..=2));
    let client = t.client();
    let heap = std::sync::Arc::new(client.heap("/threads").unwrap());
    let threads: Vec<_> = (0..4u8)
        .map(|thread| {
            let heap = heap.clone();
            std::thread::spawn(move || {
                for round in 0..40u8 {
                    let size = 64 + u64::from(thread) * 4096 + u64::from(round);
                    let object = heap.alloc(size).unwrap();
                    let bytes = vec![thread ^ round; size as usize];
                    heap.write_at(object, 0, &bytes).unwrap();
                    heap.close_object(object).unwrap();
                    // Attached again: the descriptor must be this object's
                    // file (its size and bytes), whatever other threads'
                    // frames came first.
                    if let Err(e) = heap.get(object) {
                        panic!("thread {thread} round {round}: attaching {object} again: {e:?} (errno {})", e.errno());
                    }
                    assert_eq!(heap.size(object).unwrap(), size);
                    let mut back = vec![0u8; size as usize];
                    heap.read_at(object, 0, &mut back).unwrap();
                    assert_eq!(back, bytes, "thread {thread} round {round}: another object's bytes");
                    heap.free(object).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

#[test]
fn a_dropped_heap_is_closed_on_the_server() {
    let t = serve_with(Limits { max_open_heaps: 2, ..limits(1..=1) });
    let client = t.client();
    // More opens than the limit, each dropped or closed before the next.
    for round in 0..5 {
        let heap = client.heap("/dropped").unwrap();
        let object = heap.alloc(16).unwrap();
        heap.add_name(object, &format!("o{round}")).unwrap();
        if round % 2 == 0 {
            drop(heap);
        } else {
            heap.close().unwrap();
        }
    }
    let a = client.heap("/dropped").unwrap();
    let b = client.heap("/dropped").unwrap();
    assert_eq!(client.heap("/dropped").unwrap_err().errno(), libc::EMFILE);
    assert_eq!(a.names(b.get_by_name("o4").unwrap()).unwrap(), vec!["o4".to_string()]);
}

/// The names in a directory, as a client lists them.
fn listing(client: &Client, path: &str) -> Vec<String> {
    let mut names: Vec<String> =
        client.read_dir(path).unwrap().map(|e| String::from_utf8(e.unwrap().name).unwrap()).collect();
    names.sort();
    names
}

#[test]
fn heap_changes_revoke_what_other_clients_cached() {
    let t = serve();
    let a = t.client();
    let b = t.client();
    let heap = a.heap("/leased").unwrap();
    let first = heap.alloc(100).unwrap();
    heap.add_name(first, "first").unwrap();
    // B lists the heap's directories and stats the object twice: the
    // second time from its cache, under leases.
    for _ in 0..2 {
        assert_eq!(listing(&b, "/leased/names"), vec!["first".to_string()]);
        assert_eq!(listing(&b, "/leased/objects"), vec![first.to_string()]);
        assert_eq!(b.metadata(format!("/leased/objects/{first}")).unwrap().len(), 100);
    }
    let cached = b.cache_counters();
    assert!(cached.cached_listings >= 2 && cached.cached_attributes >= 1, "B cached nothing: {cached:?}");
    // Each change through the heap is seen by B's next call.
    let second = heap.alloc(10).unwrap();
    let mut objects = vec![first.to_string(), second.to_string()];
    objects.sort();
    assert_eq!(listing(&b, "/leased/objects"), objects);
    heap.add_name(second, "second").unwrap();
    assert_eq!(listing(&b, "/leased/names"), vec!["first".to_string(), "second".to_string()]);
    heap.grow(first, 5000).unwrap();
    assert_eq!(b.metadata(format!("/leased/objects/{first}")).unwrap().len(), 5000);
    heap.free(first).unwrap();
    assert_eq!(listing(&b, "/leased/names"), vec!["second".to_string()]);
    assert_eq!(listing(&b, "/leased/objects"), vec![second.to_string()]);
    assert!(b.metadata(format!("/leased/objects/{first}")).is_err());
}
