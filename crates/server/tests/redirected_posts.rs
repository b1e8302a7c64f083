//! A posted write that its file's old owner answered with a redirect (the
//! file moved to the other worker) is sent again by whichever thread reads
//! that answer. A read of the file meanwhile, by the thread that posted
//! the write, waits for it: the read returns the write's bytes, and a
//! leased client's cached pages take them, as stored (before, the read
//! went to the server while the write was still being sent again).
//! The client's `test-hooks` hold the write just before it is sent again.
#![allow(clippy::unwrap_used)]

mod common;
mod serving;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use common::read_through;
use larder_client::{Client, OpenOptions};
use larder_server::Limits;
use serving::{limits, move_file_and_wait, pattern, serve_with};

/// One round on `client`: the posting thread's read while another thread
/// holds the redirected write in flight.
fn read_waits_for_the_redirected_write(t: &serving::Served, client: &Client, path: &str) {
    let server = t.server();
    let mut model = pattern(20_000, 1);
    let file = OpenOptions::new().read(true).write(true).create(true).open(client, path).unwrap();
    assert_eq!(file.write_at(&model, 0).unwrap(), model.len());
    // Read whole: a leased client caches its pages.
    assert!(read_through(&file) == model);
    let ino = file.ino();
    let home = server.file_owner(ino).unwrap();
    move_file_and_wait(server, ino, 1 - home);

    let hold = client.hold_resends();
    let (posted_tx, posted_rx) = mpsc::channel();
    let (read_tx, read_rx) = mpsc::channel::<()>();
    let read_done = AtomicBool::new(false);
    let write = pattern(700, 50);
    model[300..1000].copy_from_slice(&write);
    let (file, hold, read_done) = (&file, &hold, &read_done);
    let read = std::thread::scope(|s| {
        // The posting thread: posts the write to the old owner (the
        // redirect comes back on the ring), then reads when told.
        let reader = s.spawn(move || {
            file.write_posted(&write, 300).unwrap();
            posted_tx.send(()).unwrap();
            read_rx.recv().unwrap();
            let read = read_through(file);
            read_done.store(true, Ordering::Release);
            hold.wake();
            read
        });
        posted_rx.recv().unwrap();
        // Another thread reads the redirect (a flush reads every posted
        // answer) and is held just before sending the write again.
        let flusher = s.spawn(move || file.sync_all().unwrap());
        hold.wait_until(|h| h.resends > 0);
        read_tx.send(()).unwrap();
        // The read ends (stale, without the fix) or waits for the write.
        hold.wait_until(|h| h.waits > 0 || read_done.load(Ordering::Acquire));
        hold.release();
        flusher.join().unwrap();
        reader.join().unwrap()
    });
    assert!(read == model, "the posting thread's read while its write was sent again");
    assert!(read_through(file) == model, "a read after the write was sent again");
    let plain = Client::connect_socket_with(&t.socket(), false).unwrap();
    assert!(plain.read(path).unwrap() == model, "the store's bytes");
}

#[test]
fn a_read_waits_for_a_redirected_write_another_thread_sends_again() {
    let t = serve_with(Limits { lease_term: Duration::from_secs(30), ..limits(2..=2) });
    let leased = t.client();
    read_waits_for_the_redirected_write(&t, &leased, "/leased");
    let plain = Client::connect_socket_with(&t.socket(), false).unwrap();
    read_waits_for_the_redirected_write(&t, &plain, "/plain");
}
