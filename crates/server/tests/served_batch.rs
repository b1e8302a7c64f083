//! Batches of metadata operations through a running server and the Rust
//! client: applied as one transaction, or refused whole.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use larder_client::{Client, Durability, MetadataBatch};
use larder_fs::Fs;
use larder_server::{Server, ServerOptions};

fn served() -> (Server, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fs = Fs::create(&store, common::options()).unwrap();
    let server = Server::start(Arc::new(fs), ServerOptions::for_store(&store)).unwrap();
    (server, dir, store)
}

#[test]
fn a_batch_applies_every_operation_in_one_transaction() {
    let (server, _dir, store) = served();
    let client = Client::connect(&store).unwrap();
    let root = client.metadata("/").unwrap().ino();
    client.write("/draft", b"hello").unwrap();

    let mut batch = MetadataBatch::new();
    batch.mkdir(root, "inbox", 0o755).symlink(root, "latest", "inbox/mail").rename(root, "draft", root, "sent");
    let results = client.apply_batch(batch, Durability::Durable).unwrap();

    assert_eq!(results.len(), 3);
    let inbox = results[0].as_ref().unwrap();
    assert!(client.metadata("/inbox").unwrap().is_dir());
    assert_eq!(client.metadata("/inbox").unwrap().ino(), inbox.ino);
    assert_eq!(client.read_link("/latest").unwrap(), std::path::PathBuf::from("inbox/mail"));
    assert!(results[2].is_none(), "a rename returns no attributes");
    assert_eq!(client.read("/sent").unwrap(), b"hello");
    assert!(client.metadata("/draft").unwrap_err().is_not_found());
    drop(client);
    server.shutdown().unwrap();
}

#[test]
fn a_refused_operation_refuses_the_whole_batch() {
    let (server, _dir, store) = served();
    let client = Client::connect(&store).unwrap();
    let root = client.metadata("/").unwrap().ino();
    client.create_dir("/full", 0o755).unwrap();
    client.write("/full/file", b"x").unwrap();

    let mut batch = MetadataBatch::new();
    batch.mkdir(root, "made-first", 0o755).rmdir(root, "full");
    let refused = client.apply_batch(batch, Durability::Durable).unwrap_err();
    assert_eq!(refused.errno(), libc::ENOTEMPTY, "{refused}");
    assert!(
        client.metadata("/made-first").unwrap_err().is_not_found(),
        "the first operation was applied although the second was refused"
    );

    // The same for a later operation that names what an earlier one made:
    // checked on the state the earlier ones leave.
    let mut batch = MetadataBatch::new();
    batch.mkdir(root, "a", 0o755).unlink(root, "missing");
    assert_eq!(client.apply_batch(batch, Durability::Buffered).unwrap_err().errno(), libc::ENOENT);
    assert!(client.metadata("/a").unwrap_err().is_not_found());
    drop(client);
    server.shutdown().unwrap();
}
