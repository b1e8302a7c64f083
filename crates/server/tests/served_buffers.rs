//! Zero-copy buffers name stretches of one connection's data area: a
//! buffer of one client is refused by another, which would otherwise have
//! its server read or write that offset of its own area.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use larder_client::{Client, ClientError, Durability};
use larder_fs::Fs;
use larder_server::{Server, ServerOptions};

#[test]
fn a_buffer_is_refused_by_another_connection() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fs = Fs::create(&store, common::options()).unwrap();
    let server = Server::start(Arc::new(fs), ServerOptions::for_store(&store)).unwrap();
    let (a, b) = (Client::connect(&store).unwrap(), Client::connect(&store).unwrap());
    let mut from_a = a.alloc_buffer(4096).unwrap();
    from_a.as_mut_slice().fill(7);
    let file = b.create("/f").unwrap();
    let refused = |e: ClientError| matches!(e, ClientError::Invalid(_));
    assert!(refused(file.write_buffer(&from_a, 0).unwrap_err()));
    assert!(refused(file.read_buffer(&mut from_a, 0).unwrap_err()));
    b.create_bucket("bucket").unwrap();
    assert!(refused(b.put_buffer("bucket", "k", &from_a, Durability::Buffered).unwrap_err()));
    assert!(refused(b.get_buffer("bucket", "k", &mut from_a).unwrap_err()));
    assert_eq!(b.metadata("/f").unwrap().len(), 0, "nothing was written");
    // Its own connection takes it.
    let own = a.create("/g").unwrap();
    assert_eq!(own.write_buffer(&from_a, 0).unwrap(), 4096);
    assert_eq!(a.read("/g").unwrap(), vec![7u8; 4096]);
    drop((file, own, a, b));
    server.shutdown().unwrap();
}
