//! Bulk import: many keys created at once with `Kv::create_many` (one
//! bulk create per directory level, large levels written straight into
//! index runs), keys already there reported, not replaced.
//!
//! `cargo run -p larder --example bulk_import [STORE_DIR [KEYS]]` (a new
//! temporary directory and 20,000 keys without them).

use std::path::Path;
use std::time::Instant;

use larder::{Durability, Options, Store};

/// What the example did, for its test.
#[derive(Debug)]
pub struct Summary {
    /// Keys the first import created.
    pub created: usize,
    /// Keys the second import found already there.
    pub duplicates: usize,
    /// Keys a scan of the bucket finds.
    pub scanned: usize,
}

/// The `i`-th generated key and value: keys spread over 16 directory
/// levels, as a tree of files would be.
fn item(i: usize) -> (Vec<u8>, Vec<u8>) {
    (format!("shard-{:02}/item-{i:07}", i % 16).into_bytes(), format!("value of item {i}").into_bytes())
}

/// Imports `count` generated keys into bucket `import` of the store in
/// `dir` (created if missing), then imports some of them again.
pub fn run(dir: &Path, count: usize) -> Result<Summary, larder::Error> {
    let store = Store::open(dir, Options::default())?;
    let kv = store.kv();
    kv.create_bucket("import")?;

    let owned: Vec<(Vec<u8>, Vec<u8>)> = (0..count).map(item).collect();
    let items: Vec<(&[u8], &[u8])> = owned.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
    let started = Instant::now();
    // Durable: everything is on disk when it returns. Not atomic as a
    // whole: a crash keeps a prefix of its commits.
    let first = kv.create_many("import", &items, Durability::Durable)?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "created {} keys in {:.2} s ({:.0} keys/s), durable",
        first.created.len(),
        seconds,
        first.created.len() as f64 / seconds.max(1e-9)
    );

    // Importing again creates nothing: keys already there come back as
    // duplicates, left as they were (`Kv::put` replaces, if wanted).
    let again = kv.create_many("import", &items[..count / 10], Durability::Durable)?;
    println!(
        "importing the first {} again: {} duplicates, {} created",
        count / 10,
        again.duplicates.len(),
        again.created.len()
    );

    let mut scanned = 0;
    for entry in kv.scan_prefix("import", b"shard-")? {
        entry?;
        scanned += 1;
    }
    println!("a scan finds {scanned} keys");
    let (key, value) = item(count / 2);
    assert_eq!(kv.get("import", &key)?, Some(value));
    store.close()?;
    Ok(Summary { created: first.created.len(), duplicates: again.duplicates.len(), scanned })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let temporary;
    let dir = match args.next() {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            temporary = tempfile::tempdir()?;
            temporary.path().join("store")
        }
    };
    let count = match args.next() {
        Some(n) => n.to_str().and_then(|n| n.parse().ok()).ok_or("KEYS must be a number")?,
        None => 20_000,
    };
    println!("store at {}", dir.display());
    run(&dir, count)?;
    Ok(())
}
