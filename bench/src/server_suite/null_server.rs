//! A server that does (almost) nothing, on Larder's rings: the ceiling of
//! a round trip through larder-client. It speaks the same handshake (a
//! sealed region, the doorbell), and its one worker takes each request,
//! answers it with the response kind the client expects and wakes the
//! client exactly as `larder serve`'s worker does (adaptive bounded spinning,
//! then a timed doorbell sleep). It touches no storage: it keeps a table of
//! names, so that creates are real creates (a later resolve finds the
//! name) and listings list what was made, as the do-nothing FUSE file
//! system of the fs suite does; reads answer zeros of the length asked,
//! writes the length given (a buffer's bytes are not even copied out).
//!
//! It runs in its own process (`larder-bench server-null --socket PATH`),
//! as `larder serve` does, and lives until it is killed.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use larder_protocol::backoff::Spinner;
use larder_protocol::codec::{decode_request, encode_response_split};
use larder_protocol::doorbell::Doorbell;
use larder_protocol::handshake::{read_hello, send_refusal, send_welcome, Welcome};
use larder_protocol::layout::Layout;
use larder_protocol::message::{Attributes, DirectoryEntry, FileKind, Request, Response, Timestamp};
use larder_protocol::region::{Region, ServerRings};
use parking_lot::Mutex;

/// Requests taken from one client's ring per round (as `larder serve`).
const BATCH: usize = 16;
/// Most empty rounds before the worker sleeps (as `larder serve`).
const MAX_SPIN_ROUNDS: u32 = 2_000;
/// Longest doorbell sleep (as `larder serve`).
const SLEEP: Duration = Duration::from_millis(100);
/// The one worker.
const WORKER: u32 = 0;

/// One connected client.
struct NullClient {
    /// Kept open: the client watches it to learn the server is gone.
    _stream: UnixStream,
    region: Region,
    /// Completions its ring had no room for.
    backlog: Mutex<VecDeque<Vec<u8>>>,
    closed: AtomicBool,
}

/// The clients, and a generation that moves when one is added.
#[derive(Default)]
struct Clients {
    list: Mutex<Vec<Arc<NullClient>>>,
    generation: AtomicU64,
}

/// The layout `larder serve --workers 1` gives its clients (the server's
/// default limits): the same ring sizes, so the client's inline limits
/// and code paths are the same.
fn layout() -> Layout {
    Layout { workers: 1, request_ring_bytes: 256 << 10, completion_ring_bytes: 256 << 10, data_bytes: 16 << 20 }
}

/// Serves on `socket` until the process is killed.
pub fn run(socket: &Path) -> Result<()> {
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket).with_context(|| format!("binding {}", socket.display()))?;
    let (doorbell, doorbell_fd) = Doorbell::create(1).map_err(|e| anyhow::anyhow!("doorbell: {e}"))?;
    let doorbell = Arc::new(doorbell);
    let clients = Arc::new(Clients::default());
    {
        let (doorbell, clients) = (doorbell.clone(), clients.clone());
        std::thread::Builder::new().name("null-worker".into()).spawn(move || work(&doorbell, &clients))?;
    }
    for stream in listener.incoming() {
        let stream = stream?;
        if let Err(e) = admit(stream, &doorbell_fd, &clients) {
            eprintln!("null server: a client was not admitted: {e}");
        }
        let _ = doorbell.ring(WORKER);
    }
    Ok(())
}

fn admit(stream: UnixStream, doorbell_fd: &std::os::fd::OwnedFd, clients: &Clients) -> Result<()> {
    let hello = read_hello(&stream, Duration::from_secs(1))?;
    if !hello.is_supported() {
        let _ = send_refusal(&stream, libc::EPROTONOSUPPORT, "protocol version");
        anyhow::bail!("protocol version {}", hello.version);
    }
    let (region, region_fd) = Region::create(layout()).map_err(|e| anyhow::anyhow!("region: {e}"))?;
    if let Ok(rings) = region.server_rings(WORKER) {
        rings.set_sleeping(true);
    }
    let welcome = Welcome {
        epoch: 1,
        client_id: clients.generation.load(Ordering::Relaxed) + 1,
        layout: layout(),
        primary_worker: WORKER,
        max_open_handles: 1024,
        max_in_flight: 256,
    };
    send_welcome(&stream, &welcome, region_fd.as_fd(), doorbell_fd.as_fd())?;
    let client =
        NullClient { _stream: stream, region, backlog: Mutex::new(VecDeque::new()), closed: AtomicBool::new(false) };
    clients.list.lock().push(Arc::new(client));
    clients.generation.fetch_add(1, Ordering::AcqRel);
    Ok(())
}

/// The worker: the loop of `larder serve`'s worker with an answer that
/// touches nothing.
fn work(doorbell: &Doorbell, clients: &Clients) {
    let mut state = NullState::new();
    let mut snapshot: Vec<Arc<NullClient>> = Vec::new();
    let mut generation = u64::MAX;
    let (mut record, mut reply) = (Vec::new(), Vec::new());
    // Spins before sleeping as `larder serve`'s worker does.
    let mut spinner = Spinner::adaptive(MAX_SPIN_ROUNDS);
    let (mut idle_rounds, mut spin_limit) = (0u32, 0u32);
    loop {
        if clients.generation.load(Ordering::Acquire) != generation {
            generation = clients.generation.load(Ordering::Acquire);
            snapshot = clients.list.lock().clone();
        }
        let mut served = 0;
        for client in snapshot.iter().filter(|c| !c.closed.load(Ordering::Acquire)) {
            served += serve(&mut state, client, &mut record, &mut reply);
        }
        if served > 0 {
            if idle_rounds > 0 {
                spinner.finish(idle_rounds, true);
                idle_rounds = 0;
            }
            continue;
        }
        if idle_rounds == 0 {
            spin_limit = spinner.start();
        }
        if idle_rounds < spin_limit {
            idle_rounds += 1;
            std::hint::spin_loop();
            continue;
        }
        spinner.finish(idle_rounds, false);
        idle_rounds = 0;
        let Ok(seen) = doorbell.seen(WORKER) else { continue };
        let rings: Vec<ServerRings<'_>> = snapshot
            .iter()
            .filter(|c| !c.closed.load(Ordering::Acquire))
            .filter_map(|c| c.region.server_rings(WORKER).ok())
            .collect();
        for r in &rings {
            r.set_sleeping(true);
        }
        if !rings.iter().any(ServerRings::has_request) {
            let _ = doorbell.wait(WORKER, seen, SLEEP);
        }
        for r in &rings {
            r.set_sleeping(false);
        }
    }
}

/// One round of one client's ring; returns the requests taken.
fn serve(state: &mut NullState, client: &NullClient, record: &mut Vec<u8>, reply: &mut Vec<u8>) -> usize {
    let Ok(rings) = client.region.server_rings(WORKER) else { return 0 };
    let mut backlog = client.backlog.lock();
    while let Some(front) = backlog.front() {
        match rings.send(front) {
            Ok(true) => {
                backlog.pop_front();
            }
            Ok(false) => break,
            Err(_) => {
                client.closed.store(true, Ordering::Release);
                return 0;
            }
        }
    }
    let mut taken = 0;
    // As `larder serve`'s worker: the client is woken once for the
    // completions of the round (its requests here are all quick).
    let mut unwoken = false;
    while taken < BATCH {
        match rings.receive(record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(_) => {
                client.closed.store(true, Ordering::Release);
                return taken;
            }
        }
        taken += 1;
        let Ok((id, request)) = decode_request(record) else {
            client.closed.store(true, Ordering::Release);
            return taken;
        };
        reply.clear();
        // As `larder serve`'s worker: a read's bytes go into the ring
        // from where they are, after the rest of the encoding.
        let data = encode_response_split(id, state.answer(request), reply);
        let sent = backlog.is_empty() && matches!(rings.send_parts(&[reply, data]), Ok(true));
        if sent {
            unwoken = true;
        } else {
            reply.extend_from_slice(data);
            backlog.push_back(std::mem::take(reply));
        }
    }
    if unwoken {
        let _ = rings.wake_client();
    }
    taken
}

/// The name table and the canned answers.
struct NullState {
    /// Full path (no trailing slash; the root is empty) to inode and kind.
    paths: BTreeMap<Vec<u8>, (u64, FileKind)>,
    /// Directory inode to its path.
    dirs: HashMap<u64, Vec<u8>>,
    /// Open handle to inode.
    handles: HashMap<u64, u64>,
    next_ino: u64,
    next_handle: u64,
    /// The answer being returned (kept so that a read's zeros are not
    /// allocated again for every request).
    answer: Response,
    /// Zeros of each read length asked so far.
    zeros: HashMap<u32, Response>,
}

const ROOT: u64 = 1;

fn attributes(ino: u64, kind: FileKind) -> Attributes {
    let directory = kind == FileKind::Directory;
    Attributes {
        ino,
        kind,
        mode: if directory { 0o040755 } else { 0o100644 },
        nlink: if directory { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        size: 0,
        blocks: 0,
        atime: Timestamp::default(),
        mtime: Timestamp::default(),
        ctime: Timestamp::default(),
        btime: Timestamp::default(),
        generation: 1,
    }
}

fn error(errno: i32) -> Response {
    Response::Error { errno, message: "the do-nothing server".into() }
}

/// `parent/name`, the root being the empty path.
fn join(parent: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = Vec::with_capacity(parent.len() + 1 + name.len());
    path.extend_from_slice(parent);
    path.push(b'/');
    path.extend_from_slice(name);
    path
}

impl NullState {
    fn new() -> NullState {
        NullState {
            paths: BTreeMap::new(),
            dirs: HashMap::from([(ROOT, Vec::new())]),
            handles: HashMap::new(),
            next_ino: ROOT + 1,
            next_handle: 1,
            answer: Response::Done,
            zeros: HashMap::new(),
        }
    }

    /// The answer to `request`, borrowed until the next one.
    fn answer(&mut self, request: Request) -> &Response {
        if let Request::Read { length, .. } = request {
            return self.zeros.entry(length).or_insert_with(|| Response::Data(vec![0; length as usize]));
        }
        self.answer = self.compute(request);
        &self.answer
    }

    fn compute(&mut self, request: Request) -> Response {
        match request {
            Request::Ping => Response::Pong { epoch: 1 },
            Request::Resolve { path, .. } => self.resolve(&path),
            Request::GetAttributes { ino } => Response::Attributes(attributes(ino, self.kind_of(ino))),
            Request::Mkdir { parent, name, .. } => match self.add(parent, &name, FileKind::Directory) {
                Ok(ino) => Response::Attributes(attributes(ino, FileKind::Directory)),
                Err(errno) => error(errno),
            },
            Request::Create { parent, name, .. } => match self.add(parent, &name, FileKind::File) {
                Ok(ino) => Response::Created {
                    attributes: attributes(ino, FileKind::File),
                    handle: self.open(ino),
                    lease: None,
                },
                Err(errno) => error(errno),
            },
            Request::Open { ino, .. } | Request::OpenDirectory { ino } => Response::Handle(self.open(ino)),
            // Resolved and opened at once; every file is empty, so the
            // bytes asked for are none, and no leases are granted.
            Request::OpenPath { path, read, .. } => match self.resolve(&path) {
                Response::Resolved { parent, name, attributes: Some(attributes) } => Response::PathOpened {
                    parent,
                    name,
                    handle: self.open(attributes.ino),
                    data: (read > 0 && attributes.kind == FileKind::File).then(Vec::new),
                    attributes,
                    lease: None,
                },
                Response::Resolved { attributes: None, .. } => error(libc::ENOENT),
                other => other,
            },
            Request::Release { handle } | Request::ReleaseDirectory { handle } => {
                self.handles.remove(&handle);
                Response::Done
            }
            Request::Unlink { parent, name } | Request::Rmdir { parent, name } => {
                match self.dirs.get(&parent).map(|p| join(p, &name)) {
                    Some(path) if self.paths.remove(&path).is_some() => Response::Done,
                    _ => error(libc::ENOENT),
                }
            }
            Request::Rename { parent, name, new_parent, new_name, .. } => {
                let (Some(from), Some(to)) = (self.dirs.get(&parent), self.dirs.get(&new_parent)) else {
                    return error(libc::ENOENT);
                };
                let (from, to) = (join(from, &name), join(to, &new_name));
                match self.paths.remove(&from) {
                    Some(object) => {
                        self.paths.insert(to, object);
                        Response::Done
                    }
                    None => error(libc::ENOENT),
                }
            }
            Request::ReadBuffer { into, .. } => Response::Length(u64::from(into.length)),
            Request::Write { data, .. } => Response::Length(match data {
                larder_protocol::message::Payload::Inline(bytes) => bytes.len() as u64,
                larder_protocol::message::Payload::Buffer(slice) => u64::from(slice.length),
            }),
            Request::ReadDirectory { handle, offset, max_entries } => self.list(handle, offset, max_entries),
            Request::Fsync { .. } | Request::FsyncDirectory { .. } | Request::Sync => Response::Done,
            _ => error(libc::ENOSYS),
        }
    }

    fn kind_of(&self, ino: u64) -> FileKind {
        if self.dirs.contains_key(&ino) {
            FileKind::Directory
        } else {
            FileKind::File
        }
    }

    fn open(&mut self, ino: u64) -> u64 {
        let handle = self.next_handle;
        self.next_handle += 1;
        self.handles.insert(handle, ino);
        handle
    }

    fn add(&mut self, parent: u64, name: &[u8], kind: FileKind) -> Result<u64, i32> {
        let path = join(self.dirs.get(&parent).ok_or(libc::ENOENT)?, name);
        if self.paths.contains_key(&path) {
            return Err(libc::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        if kind == FileKind::Directory {
            self.dirs.insert(ino, path.clone());
        }
        self.paths.insert(path, (ino, kind));
        Ok(ino)
    }

    fn resolve(&self, path: &[u8]) -> Response {
        let path = path.strip_suffix(b"/").unwrap_or(path);
        if path.is_empty() {
            return Response::Resolved {
                parent: ROOT,
                name: Vec::new(),
                attributes: Some(attributes(ROOT, FileKind::Directory)),
            };
        }
        let split = path.iter().rposition(|&b| b == b'/').unwrap_or(0);
        let (parent_path, name) = (&path[..split], path[split..].strip_prefix(b"/").unwrap_or(&path[split..]));
        let parent = if parent_path.is_empty() {
            ROOT
        } else {
            match self.paths.get(parent_path) {
                Some(&(ino, FileKind::Directory)) => ino,
                _ => return error(libc::ENOENT),
            }
        };
        let attributes = self.paths.get(path).map(|&(ino, kind)| attributes(ino, kind));
        Response::Resolved { parent, name: name.to_vec(), attributes }
    }

    /// A page of the listing of the directory behind `handle`: entry
    /// `offset` on, each entry's `next` the offset after it.
    fn list(&self, handle: u64, offset: u64, max_entries: u32) -> Response {
        let Some(dir) = self.handles.get(&handle).and_then(|ino| self.dirs.get(ino)) else {
            return error(libc::EBADF);
        };
        let mut prefix = dir.clone();
        prefix.push(b'/');
        let entries = self
            .paths
            .range(prefix.clone()..)
            .take_while(|(path, _)| path.starts_with(&prefix))
            .filter(|(path, _)| !path[prefix.len()..].contains(&b'/'))
            .enumerate()
            .skip(offset as usize)
            .take(max_entries as usize)
            .map(|(i, (path, &(ino, kind)))| DirectoryEntry {
                ino,
                kind,
                name: path[prefix.len()..].to_vec(),
                next: i as u64 + 1,
            })
            .collect();
        Response::Entries(entries)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use larder_client::{Client, OpenOptions};

    /// Starts a do-nothing server on a socket of its own (its thread
    /// lives as long as the test process) and connects to it; the socket's
    /// directory is removed once connected.
    fn connected(name: &str) -> Client {
        let dir: PathBuf = std::env::temp_dir().join(format!("larder-bench-null-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let socket = dir.join("null.sock");
        let serving = socket.clone();
        std::thread::spawn(move || super::run(&serving));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Client::connect_socket(&socket) {
                Ok(client) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    return client;
                }
                Err(e) if Instant::now() > deadline => panic!("the do-nothing server never answered: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    #[test]
    fn answers_every_call_of_the_suite_as_the_client_expects() {
        let client = connected("calls");
        client.create_dir("/d", 0o755).expect("mkdir");
        for i in 0..600 {
            OpenOptions::new().write(true).create_new(true).open(&client, format!("/d/f{i:04}")).expect("create");
        }
        // A create of a name that exists fails as on a file system.
        let again = OpenOptions::new().write(true).create_new(true).open(&client, "/d/f0000");
        assert_eq!(again.err().map(|e| e.errno()), Some(libc::EEXIST));
        assert!(client.metadata("/d/f0007").expect("stat").is_file());
        assert_eq!(client.metadata("/d/nothing").err().map(|e| e.errno()), Some(libc::ENOENT));
        // Two pages of 512 and the end of the listing.
        let names: Vec<Vec<u8>> = client.read_dir("/d").expect("opendir").map(|e| e.expect("entry").name).collect();
        assert_eq!(names.len(), 600);
        assert_eq!(names.first().map(|n| &n[..]), Some(&b"f0000"[..]));
        client.rename("/d/f0001", "/d/g0001").expect("rename");
        assert_eq!(client.metadata("/d/f0001").err().map(|e| e.errno()), Some(libc::ENOENT));
        client.remove_file("/d/g0001").expect("unlink");
        assert_eq!(client.read_dir("/d").expect("opendir").count(), 599);
        drop(client.open("/d/f0002").expect("open"));
        let mut options = OpenOptions::new();
        let file = options.read(true).write(true).create(true).append(true).open(&client, "/d/log").expect("open");
        let mut out = vec![1u8; 16 << 10];
        assert_eq!(file.read_at(&mut out, 4096).expect("read"), out.len());
        assert!(out.iter().all(|&b| b == 0));
        assert_eq!(file.write_at(&out[..4096], 0).expect("write"), 4096);
        let mut buffer = client.alloc_buffer(16 << 10).expect("a buffer");
        buffer.as_mut_slice().fill(7);
        assert_eq!(file.write_buffer(&buffer, 0).expect("zero-copy write"), 16 << 10);
        assert_eq!(client.ping().expect("ping"), 1);
    }
}
