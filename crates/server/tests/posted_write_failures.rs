//! A posted write the server refuses after the client went on (the store
//! full: ENOSPC), as Linux reports a failed writeback: the next fsync or
//! close of every descriptor open when it failed returns the error, once
//! each (errseq), and the client's cache, leased or not, never serves the
//! bytes that did not land once the refusal was read.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::read_through as read_all;
use larder_client::{Client, OpenOptions};
use larder_fs::Fs;
use larder_io::{SimStorage, Storage};
use larder_server::{Server, ServerOptions};

/// A server over a store on simulated storage whose capacity the test
/// lowers; its socket in a real directory.
struct Full {
    _server: Server,
    fs: Arc<Fs>,
    sim: SimStorage,
    store: PathBuf,
    _dir: tempfile::TempDir,
}

impl Full {
    fn start() -> Full {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let sim = SimStorage::new(7);
        let fs = Arc::new(Fs::create_with(Arc::new(sim.clone()), &store, common::options()).unwrap());
        let options =
            ServerOptions { limits: Default::default(), ..ServerOptions::for_store(dir.path()) }.workers(1..=1);
        let server = Server::start(Arc::clone(&fs), options).unwrap();
        Full { _server: server, fs, sim, store: dir.path().to_path_buf(), _dir: dir }
    }

    fn client(&self, leases: bool) -> Client {
        Client::connect_socket_with(&larder_client::socket_of(&self.store), leases).unwrap()
    }

    /// Leaves the store's file system less room than the store keeps in
    /// reserve: writes of a few bytes get ENOSPC, deletes still work.
    fn fill(&self) {
        self.sim.set_capacity(u64::MAX / 2);
        let used = u64::MAX / 2 - self.sim.available_bytes(&self.store).unwrap();
        self.sim.set_capacity(used + (1 << 20));
        // Asked again at the next check, not taken from the last one.
        let space = self.fs.store().space();
        space.set_reserve_bytes(space.reserve_bytes());
    }
}

#[test]
fn a_posted_write_refused_for_space_comes_back_once_per_open_and_is_never_read_back() {
    for leases in [true, false] {
        let t = Full::start();
        let client = t.client(leases);
        let plain = t.client(false);
        let data: Vec<u8> = (0..10_000).map(|i| (i % 253) as u8).collect();
        client.write("/f", &data).unwrap();
        let rw = || OpenOptions::new().read(true).write(true).open(&client, "/f").unwrap();
        let (writer, other) = (rw(), rw());
        assert!(read_all(&writer) == data, "leases {leases}: before");
        t.fill();

        // Two posts (the second past the end), read back at once: the
        // read waits for their refusals, which drop the cached pages and
        // size the posts patched.
        writer.write_posted(b"never lands", 100).unwrap();
        writer.write_posted(b"past the end", data.len() as u64).unwrap();
        assert!(read_all(&writer) == data, "leases {leases}: a read through the writer after the refusal");
        assert_eq!(writer.metadata().unwrap().len(), data.len() as u64, "leases {leases}: the size after them");
        assert!(read_all(&other) == data, "leases {leases}: a read through another open");
        assert!(client.read("/f").unwrap() == data, "leases {leases}: a read by path");
        assert!(plain.read("/f").unwrap() == data, "leases {leases}: the store's bytes");

        let errno = |r: larder_client::Result<()>| r.err().map(|e| e.errno());
        assert_eq!(errno(writer.sync_all()), Some(libc::ENOSPC), "leases {leases}: the writer's fsync");
        assert_eq!(errno(writer.sync_all()), None, "leases {leases}: once");
        assert_eq!(errno(other.sync_all()), Some(libc::ENOSPC), "leases {leases}: another open's fsync");
        assert_eq!(errno(other.sync_all()), None, "leases {leases}: once for it too");
        // An open made after the failure was reported does not see it.
        let later = rw();
        assert_eq!(errno(later.sync_all()), None, "leases {leases}: an open after it was reported");
        writer.close().unwrap();
        other.close().unwrap();
        later.close().unwrap();
    }
}

#[test]
fn a_refused_posted_write_comes_back_at_close_for_each_open() {
    let t = Full::start();
    let client = t.client(true);
    client.write("/f", b"content").unwrap();
    let rw = || OpenOptions::new().read(true).write(true).open(&client, "/f").unwrap();
    let (writer, other) = (rw(), rw());
    t.fill();
    writer.write_posted(b"never lands", 0).unwrap();
    assert_eq!(writer.close().unwrap_err().errno(), libc::ENOSPC, "the writer's close");
    assert_eq!(other.close().unwrap_err().errno(), libc::ENOSPC, "another open's close");
    assert_eq!(client.read("/f").unwrap(), b"content");
}
