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
    // A freed object's file is removed or kept for reuse (a spare, at most
    // SPARE_FILES of them, emptied or small and whole, SPARE_KEPT_BYTES of
    // them together): besides the control object's file, only spares.
    let spares: Vec<u64> = std::fs::read_dir(t.store.join("heap"))
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_name().to_string_lossy() != control.to_string())
        .map(|entry| entry.metadata().unwrap().len())
        .collect();
    assert!(spares.len() <= larder_heap::limits::SPARE_FILES, "{} spares", spares.len());
    assert!(spares.iter().all(|&len| len <= larder_heap::limits::SPARE_KEPT_FILE_BYTES), "spares: {spares:?}");
    assert!(spares.iter().sum::<u64>() <= larder_heap::limits::SPARE_KEPT_BYTES, "spares: {spares:?}");
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

/// The server keeps the mappings of objects its session heaps closed
/// (docs/heap.md, "Closed mappings"; every attach for a client closes the
/// object again in the server): a free, a growth or a file cut by another
/// process between two attaches is seen by the next one.
#[test]
fn the_servers_kept_mappings_follow_frees_growth_and_cut_files() {
    let t = serve();
    let a = t.client();
    let b = t.client();
    let heap_a = a.heap("/k").unwrap();
    let heap_b = b.heap("/k").unwrap();
    let object = heap_a.alloc(4096).unwrap();
    heap_a.write_at(object, 0, b"kept").unwrap();
    heap_a.close_object(object).unwrap();
    let mut buf = [0u8; 4];
    heap_b.get(object).unwrap();
    heap_b.read_at(object, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"kept");
    heap_b.close_object(object).unwrap();
    // Growth by another client, between b's attaches.
    heap_a.get(object).unwrap();
    heap_a.grow(object, 3 * 4096).unwrap();
    heap_a.write_at(object, 2 * 4096, b"more").unwrap();
    heap_a.close_object(object).unwrap();
    heap_b.get(object).unwrap();
    assert_eq!(heap_b.size(object).unwrap(), 3 * 4096);
    heap_b.read_at(object, 2 * 4096, &mut buf).unwrap();
    assert_eq!(&buf, b"more");
    heap_b.close_object(object).unwrap();
    heap_a.sync().unwrap();
    // The file cut by another process: refused (EIO), not mapped; whole
    // again, attached again.
    let path = t.store.join(larder_object::HEAP_DIR).join(object.to_string());
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(100).unwrap();
    assert_eq!(heap_b.get(object).unwrap_err().errno(), libc::EIO);
    file.set_len(3 * 4096).unwrap();
    heap_b.get(object).unwrap();
    heap_b.close_object(object).unwrap();
    // Freed by another client: gone for b, never its old bytes.
    heap_a.free(object).unwrap();
    assert_eq!(heap_b.get(object).unwrap_err().errno(), libc::ENOENT);
    assert_eq!(heap_b.size(object).unwrap_err().errno(), libc::ENOENT, "the server's attach for the size");
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

/// Blocks the `alloc_in` tests allocate, and the (size, alignment) of
/// each: sizes from 16 bytes to a few pages, so the object's allocator
/// grows the object several times.
const BLOCKS: usize = 48;

fn block_shape(i: usize) -> (u64, u64) {
    let sizes = [16u64, 24, 100, 512, 1000, 4096, 7000];
    let aligns = [1u64, 8, 16, 64, 4096];
    (sizes[i % sizes.len()], aligns[i % aligns.len()])
}

/// The bytes of block `i` of `size`: its index and a pattern, so a block
/// read at the wrong place or overwritten by a neighbour shows.
fn block_bytes(i: usize, size: u64) -> Vec<u8> {
    (0..size).map(|at| (i as u64 * 131 + at * 7 + at / 251) as u8).collect()
}

/// The table of block pointers the owner keeps at the start of the
/// object's user bytes: a pointer to a block of `BLOCKS` pointers.
fn block_table(heap: &RemoteHeap, object: u64) -> Vec<HeapPointer> {
    let start = HeapPointer { object, offset: 0, generation: 0 };
    #[allow(unsafe_code)]
    // SAFETY: `deref` checked that a whole aligned HeapPointer lies inside
    // the mapped object; the owner wrote it before this process started.
    let table = unsafe { std::ptr::read(heap.deref::<HeapPointer>(start).unwrap()) };
    #[allow(unsafe_code)]
    // SAFETY: as above, for the table block of BLOCKS pointers.
    unsafe {
        std::ptr::read(heap.deref::<[HeapPointer; BLOCKS]>(table).unwrap()).to_vec()
    }
}

/// Reads block `i` through this process's mapping, after `deref` checked
/// its pointer.
fn read_block(heap: &RemoteHeap, pointer: HeapPointer, i: usize) -> Vec<u8> {
    let (size, _) = block_shape(i);
    let address = heap.deref::<u8>(pointer).unwrap();
    #[allow(unsafe_code)]
    // SAFETY: the object is mapped, and its first byte too.
    let expected = unsafe { heap.pointer(pointer.object).unwrap().add(pointer.offset as usize) };
    assert_eq!(address, expected, "block {i}: deref's address is not the mapping's");
    let mut bytes = vec![0u8; size as usize];
    heap.read_at(pointer.object, pointer.offset, &mut bytes).unwrap();
    bytes
}

#[test]
fn alloc_in_blocks_are_shared_between_processes_and_free_in_makes_them_stale() {
    if let Some(role) = role() {
        let client = child_client();
        let heap = client.heap("/blocks").unwrap();
        let object = heap.get(heap.get_by_name("blocks").unwrap()).unwrap();
        let table = block_table(&heap, object);
        for (i, pointer) in table.iter().enumerate() {
            let freed = role == "after-free" && i % 2 == 0;
            if freed {
                assert_eq!(heap.deref::<u8>(*pointer).unwrap_err().errno(), libc::ESTALE, "block {i} was freed");
            } else {
                assert_eq!(read_block(&heap, *pointer, i), block_bytes(i, block_shape(i).0), "block {i}");
            }
        }
        println!("{role}: {} blocks checked", table.len());
        return;
    }
    let t = serve();
    let owner_client = t.client();
    let other_client = t.client();
    let heap = owner_client.heap("/blocks").unwrap();
    let other = other_client.heap("/blocks").unwrap();
    let object = heap.alloc(64).unwrap();
    heap.add_name(object, "blocks").unwrap();
    let base = heap.pointer(object).unwrap();
    // Mapped by another client before the allocator grows the object.
    other.get(object).unwrap();
    assert_eq!(other.size(object).unwrap(), 64);

    let mut pointers = Vec::new();
    for i in 0..BLOCKS {
        let (size, align) = block_shape(i);
        let pointer = heap.alloc_in(object, size, align).unwrap();
        assert_eq!(pointer.object, object);
        assert!(pointer.offset.is_multiple_of(align), "block {i} at {} is not {align}-aligned", pointer.offset);
        assert!(pointer.offset >= 64, "block {i} overlaps the object's user bytes");
        assert_ne!(pointer.generation, 0, "a block's pointer carries its generation");
        let bytes = block_bytes(i, size);
        let address = heap.deref::<u8>(pointer).unwrap();
        #[allow(unsafe_code)]
        // SAFETY: the block's `size` bytes lie inside the object (the
        // server placed them there and this mapping took in the growth),
        // mapped writable; `deref` checked its first byte.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), address, bytes.len());
        }
        pointers.push(pointer);
    }
    assert_eq!(heap.pointer(object).unwrap(), base, "growth inside the reservation moved the base");
    let grown = heap.size(object).unwrap();
    let end = pointers.iter().enumerate().map(|(i, p)| p.offset + block_shape(i).0).max().unwrap();
    assert!(grown >= end, "the object ({grown} bytes) does not cover its last block (ends at {end})");
    // Blocks do not overlap: each still holds its own bytes.
    for (i, pointer) in pointers.iter().enumerate() {
        assert_eq!(read_block(&heap, *pointer, i), block_bytes(i, block_shape(i).0), "block {i} was overwritten");
    }
    let table = heap.alloc_in(object, (BLOCKS * 24) as u64, 8).unwrap();
    #[allow(unsafe_code)]
    // SAFETY: `deref` checked both places: the table block holds BLOCKS
    // pointers, the user bytes at 0 hold one; both are mapped writable.
    unsafe {
        let slots = heap.deref::<[HeapPointer; BLOCKS]>(table).unwrap();
        std::ptr::write(slots, pointers.clone().try_into().unwrap());
        std::ptr::write(heap.deref::<HeapPointer>(HeapPointer { object, offset: 0, generation: 0 }).unwrap(), table);
    }

    // The other client mapped the object at 64 bytes: its deref takes in
    // the growth.
    assert_eq!(block_table(&other, object), pointers);
    for (i, pointer) in pointers.iter().enumerate() {
        assert_eq!(read_block(&other, *pointer, i), block_bytes(i, block_shape(i).0), "block {i} seen by the other");
    }
    // Another process, with nothing mapped: the same pointers, the same bytes.
    let test = "alloc_in_blocks_are_shared_between_processes_and_free_in_makes_them_stale";
    let out = finished(child(test, "before-free", &t.socket(), 0, None), "the first reading process");
    assert!(out.contains(&format!("before-free: {BLOCKS} blocks checked")), "the reader did not check: {out}");

    // Free every other block: stale for every client, the rest untouched.
    for pointer in pointers.iter().step_by(2) {
        heap.free_in(*pointer).unwrap();
    }
    for (i, pointer) in pointers.iter().enumerate() {
        for (who, h) in [("owner", &heap), ("other", &other)] {
            if i % 2 == 0 {
                assert_eq!(h.deref::<u8>(*pointer).unwrap_err().errno(), libc::ESTALE, "{who}: freed block {i}");
            } else {
                assert_eq!(read_block(h, *pointer, i), block_bytes(i, block_shape(i).0), "{who}: block {i}");
            }
        }
    }
    let out = finished(child(test, "after-free", &t.socket(), 0, None), "the second reading process");
    assert!(out.contains(&format!("after-free: {BLOCKS} blocks checked")), "the reader did not check: {out}");

    // Bad pointers to free_in are errors, and the session goes on.
    assert_eq!(heap.free_in(pointers[0]).unwrap_err().errno(), libc::ESTALE, "a double free");
    let wrong_generation = HeapPointer { generation: pointers[1].generation + 1000, ..pointers[1] };
    assert_eq!(heap.free_in(wrong_generation).unwrap_err().errno(), libc::ESTALE);
    let user_bytes = HeapPointer { object, offset: 0, generation: 0 };
    assert_eq!(heap.free_in(user_bytes).unwrap_err().errno(), libc::ESTALE);
    let past_end = HeapPointer { offset: u64::MAX - 7, ..pointers[1] };
    assert_eq!(heap.free_in(past_end).unwrap_err().errno(), libc::ESTALE);
    let no_object = HeapPointer { object: object + 1_000_000, ..pointers[1] };
    assert_eq!(heap.free_in(no_object).unwrap_err().errno(), libc::ENOENT);
    assert_eq!(heap.free_in(HeapPointer::default()).unwrap_err().errno(), libc::ENOENT);
    // Bad allocations too.
    assert_eq!(heap.alloc_in(object, 0, 8).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(heap.alloc_in(object, 16, 3).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(heap.alloc_in(object, 16, 8192).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(heap.alloc_in(object + 1_000_000, 16, 8).unwrap_err().errno(), libc::ENOENT);
    assert_eq!(read_block(&heap, pointers[1], 1), block_bytes(1, block_shape(1).0));
    heap.free_in(pointers[1]).unwrap();
    assert_eq!(other.deref::<u8>(pointers[1]).unwrap_err().errno(), libc::ESTALE);

    // Logged by the server: after a sync the store's size covers the
    // blocks, and the file holds their bytes.
    heap.sync().unwrap();
    let committed = owner_client.metadata(format!("/blocks/objects/{object}")).unwrap().len();
    assert!(committed >= end, "committed size {committed} does not cover the blocks (end {end})");
    let file = std::fs::read(t.store.join("heap").join(object.to_string())).unwrap();
    let last = BLOCKS - 1;
    let at = pointers[last].offset as usize;
    assert_eq!(&file[at..at + block_shape(last).0 as usize], &block_bytes(last, block_shape(last).0)[..]);
}

#[test]
fn a_reader_may_not_alloc_in_or_free_in() {
    if role().is_some() {
        let client = child_client();
        let heap = client.heap("/guarded-blocks").unwrap();
        let object = heap.get(heap.get_by_name("shared").unwrap()).unwrap();
        assert!(!heap.is_writable(object).unwrap());
        let table = block_table(&heap, object);
        // It reads the blocks...
        for (i, pointer) in table.iter().enumerate() {
            assert_eq!(read_block(&heap, *pointer, i), block_bytes(i, block_shape(i).0), "block {i}");
        }
        // ...and may neither allocate nor free: the object stays as it is.
        let size = heap.size(object).unwrap();
        assert_eq!(heap.alloc_in(object, 16, 8).unwrap_err().errno(), libc::EACCES);
        assert_eq!(heap.alloc_in(object, 8192, 4096).unwrap_err().errno(), libc::EACCES);
        assert_eq!(heap.free_in(table[0]).unwrap_err().errno(), libc::EACCES);
        heap.get(object).unwrap();
        assert_eq!(heap.size(object).unwrap(), size);
        assert_eq!(read_block(&heap, table[0], 0), block_bytes(0, block_shape(0).0), "block 0 after the refusals");
        println!("read-only block checks done");
        return;
    }
    if rustix::process::geteuid().as_raw() != 0 {
        assert!(std::env::var("LARDER_SKIP_ROOT").is_ok(), "needs root (to run a reader as another uid)");
        return;
    }
    let t = serve();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(t.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let client = t.client();
    let heap = client.heap("/guarded-blocks").unwrap();
    let object = heap.alloc(64).unwrap();
    heap.add_name(object, "shared").unwrap();
    let mut pointers = Vec::new();
    for i in 0..BLOCKS {
        let (size, align) = block_shape(i);
        let pointer = heap.alloc_in(object, size, align).unwrap();
        heap.write_at(object, pointer.offset, &block_bytes(i, size)).unwrap();
        pointers.push(pointer);
    }
    let table = heap.alloc_in(object, (BLOCKS * 24) as u64, 8).unwrap();
    let table_bytes: Vec<u8> =
        pointers.iter().flat_map(|p| [p.object, p.offset, p.generation]).flat_map(u64::to_le_bytes).collect();
    heap.write_at(object, table.offset, &table_bytes).unwrap();
    let start: Vec<u8> =
        [table.object, table.offset, table.generation].into_iter().flat_map(u64::to_le_bytes).collect();
    heap.write_at(object, 0, &start).unwrap();
    let size = heap.size(object).unwrap();

    let test = "a_reader_may_not_alloc_in_or_free_in";
    let out = finished(child(test, "reader", &t.socket(), 0, Some(READER_UID)), "the reader");
    assert!(out.contains("read-only block checks done"), "the reader did not run its checks: {out}");
    // Nothing it tried changed the object: every block is live, the size
    // is the same.
    assert_eq!(heap.get(object).unwrap(), object);
    assert_eq!(heap.size(object).unwrap(), size);
    for (i, pointer) in pointers.iter().enumerate() {
        assert_eq!(read_block(&heap, *pointer, i), block_bytes(i, block_shape(i).0), "block {i}");
    }
}

#[test]
fn threads_of_one_client_alloc_in_one_object_at_once() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 150;
    let t = serve_with(limits(1..=2));
    let client = t.client();
    let heap = std::sync::Arc::new(client.heap("/thread-blocks").unwrap());
    let object = heap.alloc(64).unwrap();
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let heap = heap.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for round in 0..PER_THREAD {
                    let i = thread * PER_THREAD + round;
                    let (size, align) = block_shape(i);
                    // Each thread's allocations may grow the object while
                    // the others write theirs through the same mapping.
                    let pointer = heap.alloc_in(object, size, align).unwrap();
                    heap.write_at(object, pointer.offset, &block_bytes(i, size)).unwrap();
                    if round % 3 == 0 {
                        heap.free_in(pointer).unwrap();
                    } else {
                        mine.push((i, pointer));
                    }
                }
                mine
            })
        })
        .collect();
    let mut live: Vec<(usize, HeapPointer)> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    live.sort_by_key(|(_, p)| p.offset);
    for pair in live.windows(2) {
        let ((i, a), (j, b)) = (pair[0], pair[1]);
        assert!(a.offset + block_shape(i).0 <= b.offset, "blocks {i} and {j} overlap: {a:?} {b:?}");
    }
    for (i, pointer) in &live {
        assert_eq!(read_block(&heap, *pointer, *i), block_bytes(*i, block_shape(*i).0), "block {i}");
    }
}
