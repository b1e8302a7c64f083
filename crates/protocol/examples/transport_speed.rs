//! Measures the transport alone: a record's send and receive in one
//! thread; then, two threads over one region, a round trip through a
//! request and a completion ring with both sides spinning, the same with
//! both sides sleeping on futexes, and the server's copy out of the data
//! area. `cargo run --release -p larder-protocol --example
//! transport_speed [records]` (`records`: the records alone).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use larder_protocol::backoff::Spinner;
use larder_protocol::doorbell::Doorbell;
use larder_protocol::layout::{Layout, PAGE_BYTES};
use larder_protocol::region::Region;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const LAYOUT: Layout =
    Layout { workers: 1, request_ring_bytes: 64 << 10, completion_ring_bytes: 64 << 10, data_bytes: 1024 * PAGE_BYTES };

/// The server: answers every request with its first 8 bytes, at once.
fn serve(region: &Region, doorbell: &Doorbell, sleep: bool, stop: &AtomicBool) -> Result<()> {
    let rings = region.server_rings(0)?;
    let mut out = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if rings.receive(&mut out)? {
            while !rings.send(&out[..8.min(out.len())])? {
                std::hint::spin_loop();
            }
            rings.wake_client()?;
        } else if sleep {
            let seen = doorbell.seen(0)?;
            rings.set_sleeping(true);
            if !rings.has_request() {
                doorbell.wait(0, seen, Duration::from_millis(100))?;
            }
            rings.set_sleeping(false);
        } else {
            std::hint::spin_loop();
        }
    }
    Ok(())
}

fn round_trips(sleep: bool, count: u32) -> Result<Duration> {
    let region = Arc::new(Region::anonymous(LAYOUT)?);
    let doorbell = Arc::new(Doorbell::anonymous(1)?);
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let (region, doorbell, stop) = (Arc::clone(&region), Arc::clone(&doorbell), Arc::clone(&stop));
        std::thread::spawn(move || serve(&region, &doorbell, sleep, &stop))
    };
    let rings = region.client_rings(0)?;
    let request = [7u8; 64];
    let mut out = Vec::new();
    let mut spinner = if sleep { Spinner::fixed(0) } else { Spinner::fixed(u32::MAX) };
    let started = Instant::now();
    for _ in 0..count {
        while !rings.send(&request)? {}
        if rings.server_sleeping() {
            doorbell.ring(0)?;
        }
        rings.wait_for_completion(&mut spinner, Duration::from_secs(10))?;
        if !rings.receive(&mut out)? {
            return Err("no completion".into());
        }
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    server.join().map_err(|_| "server thread panicked")??;
    Ok(took / count)
}

fn copy_out(length: u32, count: u32) -> Result<f64> {
    let region = Region::anonymous(LAYOUT)?;
    let data = region.data();
    data.copy_in(0, &vec![1u8; length as usize])?;
    let started = Instant::now();
    let mut sum = 0u64;
    for _ in 0..count {
        sum += u64::from(data.copy_out(0, length)?[length as usize - 1]);
    }
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(sum, u64::from(count));
    Ok(f64::from(length) * f64::from(count) / seconds / 1e9)
}

/// One record of `length` bytes sent on a completion ring and received,
/// in one thread: the copies in and out and the checksums, without a
/// wake-up. The fastest of 20 batches, per record.
fn record(length: usize, count: u32) -> Result<Duration> {
    let region = Region::anonymous(LAYOUT)?;
    let (server, client) = (region.server_rings(0)?, region.client_rings(0)?);
    let record = vec![3u8; length];
    let mut out = Vec::new();
    let mut best = Duration::MAX;
    for _ in 0..20 {
        let started = Instant::now();
        for _ in 0..count {
            assert!(server.send(&record)?);
            assert!(client.receive(&mut out)?);
        }
        best = best.min(started.elapsed() / count);
    }
    assert_eq!(out.len(), length);
    Ok(best)
}

fn main() -> Result<()> {
    for length in [64, 4096, 16 << 10] {
        println!("a {length}-byte record sent and received: {:?}", record(length, 2_000)?);
    }
    if std::env::args().any(|arg| arg == "records") {
        return Ok(());
    }
    println!("round trip, both spinning:        {:?}", round_trips(false, 200_000)?);
    println!("round trip, both sleeping (futex): {:?}", round_trips(true, 20_000)?);
    println!("copy_out 16 KiB: {:.1} GB/s", copy_out(16 << 10, 50_000)?);
    println!("copy_out 1 MiB:  {:.1} GB/s", copy_out(1 << 20, 1_000)?);
    Ok(())
}
