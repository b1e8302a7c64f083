//! Times `Tree::first` on a tree used as a work queue, against the first
//! item of a fresh iterator (`iter().next()`, what `first` did before it
//! read the start hint's live candidate directly), in alternating blocks
//! on the same store. Each step commits one insert, calls the timed read,
//! and commits the removal of the entry it returned. Keys are hashed
//! (new ones land anywhere, as in Garage's Merkle to-do list) or
//! sequential (new ones at the end).
//!
//!     cargo run --release -p larder-trees --example tree_first -- [hashed|sequential] [backlog] [DIR]
use larder_trees::{Durability, Tree, Trees};
use std::time::{Duration, Instant};

type Read = fn(&Tree) -> Result<Option<(Vec<u8>, Vec<u8>)>, larder_trees::TreesError>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let hashed = args.get(1).is_none_or(|m| m != "sequential");
    let backlog: u64 = args.get(2).map_or(Ok(1000), |b| b.parse())?;
    let base = match args.get(3) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::env::temp_dir(),
    };
    let dir = tempfile::tempdir_in(base)?;
    let trees = Trees::open_dir(&dir.path().join("s"))?;
    let todo = trees.open_tree("todo")?;
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let mut seq = 0u64;
    let mut next = move || {
        if hashed {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        } else {
            seq += 1;
            seq
        }
    };
    {
        let mut tx = trees.write(Durability::Buffered)?;
        for _ in 0..backlog {
            tx.insert(&todo, &next().to_be_bytes(), &[7u8; 64])?;
        }
        tx.commit()?;
    }
    let reads: [(&str, Read); 2] = [("iter().next()", |t| t.iter()?.next().transpose()), ("first()", Tree::first)];
    let steps = 20_000;
    let mut totals = [Duration::ZERO; 2];
    for round in 0..10 {
        // Alternate which read goes first in a round.
        for i in 0..2 {
            let which = (i + round) % 2;
            let (name, read) = reads[which];
            let mut spent = Duration::ZERO;
            for _ in 0..steps {
                todo.insert(&next().to_be_bytes(), &[7u8; 64])?;
                let start = Instant::now();
                let first = read(&todo)?;
                spent += start.elapsed();
                if let Some((k, _)) = first {
                    let mut tx = trees.write(Durability::Buffered)?;
                    tx.remove(&todo, &k)?;
                    tx.commit()?;
                }
            }
            totals[which] += spent;
            println!("round {round} {name}: {:.2} us a read", spent.as_secs_f64() * 1e6 / steps as f64);
        }
    }
    for (i, (name, _)) in reads.iter().enumerate() {
        println!("total {name}: {:.2} us a read", totals[i].as_secs_f64() * 1e6 / (10 * steps) as f64);
    }
    trees.close()?;
    Ok(())
}
