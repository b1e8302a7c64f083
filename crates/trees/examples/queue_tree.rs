//! A tree used as a work queue with hashed keys (as Garage's Merkle to-do
//! list): a backlog of 1,000 entries, then rounds of one insert at a
//! random place and one pop of the first entry, each its own buffered
//! transaction. Prints the rate per round: without the trees' start hint
//! every `first()` steps over the tombstones of everything popped so far,
//! and the rate falls round after round.
//!
//!     cargo run --release -p larder-trees --example queue_tree
use larder_trees::{Durability, Trees};
use std::time::Instant;
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let trees = Trees::open_dir(&dir.path().join("s"))?;
    let todo = trees.open_tree("todo")?;
    let mut x = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // A backlog of 1,000 entries with hashed keys, then insert one / pop one.
    {
        let mut tx = trees.write(Durability::Buffered)?;
        for _ in 0..1000 {
            tx.insert(&todo, &next().to_be_bytes(), b"v")?;
        }
        tx.commit()?;
    }
    for round in 0..3 {
        let start = Instant::now();
        let n = 50_000;
        for _ in 0..n {
            let mut tx = trees.write(Durability::Buffered)?;
            tx.insert(&todo, &next().to_be_bytes(), b"v")?;
            tx.commit()?;
            if let Some((k, _)) = todo.first()? {
                let mut tx = trees.write(Durability::Buffered)?;
                tx.remove(&todo, &k)?;
                tx.commit()?;
            }
        }
        println!("round {round}: {:.0} insert+first+remove per s", n as f64 / start.elapsed().as_secs_f64());
    }
    trees.close()?;
    Ok(())
}
