//! `larder tree STORE ls|get|put|rm|scan|drop`: the transactional trees of
//! a store (docs/trees.md). Keys and values are given and shown as UTF-8
//! (control characters and invalid bytes escaped), or with `--hex` as hex
//! digits. On the store opened in this process: the server protocol has
//! no tree requests, so while a server serves the store these commands
//! refuse and say to stop it.

use std::io::{self, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use larder_object::meta::prefix_end;
use larder_object::{Store, StoreOptions};
use larder_trees::{Tree, Trees};

use crate::store::shown;

/// `larder tree` arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct TreeArgs {
    /// Store directory.
    store: PathBuf,
    /// Keys and values are hex digits (in and out), not UTF-8 text.
    #[arg(long, global = true)]
    hex: bool,
    #[command(subcommand)]
    op: TreeOp,
}

/// Operations on trees.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum TreeOp {
    /// List the trees and their lengths.
    Ls,
    /// Print the value of KEY in TREE.
    Get {
        /// The tree.
        tree: String,
        /// The key.
        key: String,
    },
    /// Set KEY to VALUE in TREE (created if missing), durably.
    Put {
        /// The tree.
        tree: String,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Remove KEY from TREE, durably.
    Rm {
        /// The tree.
        tree: String,
        /// The key.
        key: String,
    },
    /// Print the entries of TREE (key, a tab, the value; one a line), in
    /// key order or reversed, all of them or a range.
    Scan {
        /// The tree.
        tree: String,
        /// Only keys starting with P.
        #[arg(long, value_name = "P", conflicts_with_all = ["start", "end"])]
        prefix: Option<String>,
        /// Only keys at or after S.
        #[arg(long, value_name = "S")]
        start: Option<String>,
        /// Only keys before E.
        #[arg(long, value_name = "E")]
        end: Option<String>,
        /// Last key first.
        #[arg(long)]
        reverse: bool,
        /// At most N entries.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Delete TREE and every entry in it, durably.
    Drop {
        /// The tree.
        tree: String,
    },
}

/// Runs `larder tree`.
pub(crate) fn run(args: &TreeArgs) -> Result<()> {
    let dir = &args.store;
    let trees = open(dir)?;
    let done = match &args.op {
        TreeOp::Ls => ls(&trees),
        TreeOp::Get { tree, key } => get(&trees, tree, &parse(key, args.hex)?, args.hex),
        TreeOp::Put { tree, key, value } => {
            trees.open_tree(tree)?.insert(&parse(key, args.hex)?, &parse(value, args.hex)?).map_err(Into::into)
        }
        TreeOp::Rm { tree, key } => rm(&trees, tree, &parse(key, args.hex)?, args.hex),
        TreeOp::Scan { tree, prefix, start, end, reverse, limit } => {
            let parse_opt = |s: &Option<String>| s.as_deref().map(|s| parse(s, args.hex)).transpose();
            let range = Range { prefix: parse_opt(prefix)?, start: parse_opt(start)?, end: parse_opt(end)? };
            scan(&trees, tree, &range, !reverse, limit.unwrap_or(usize::MAX), args.hex)
        }
        TreeOp::Drop { tree } => {
            if trees.delete_tree(tree)? {
                Ok(())
            } else {
                Err(anyhow!("no tree named {tree:?}"))
            }
        }
    };
    done.with_context(|| format!("store at {}", dir.display()))?;
    trees.close().with_context(|| format!("closing the store at {}", dir.display()))
}

/// The store's trees, opened here; refused while a server serves it.
fn open(dir: &Path) -> Result<Trees> {
    let socket = larder_client::socket_of(dir);
    if socket.exists() && larder_client::Client::connect_socket_with(&socket, false).is_ok() {
        bail!(
            "the store at {} is served by `larder serve`, and the server has no tree requests yet: \
             stop the server, then run `larder tree` again",
            dir.display()
        );
    }
    let storage = Arc::new(larder_io::RealStorage::new());
    let store = Store::open(storage, dir, StoreOptions::default())
        .map_err(|e| crate::store::opening_error(dir, larder_kv::KvError::Object(e)))?;
    Ok(Trees::open(Arc::new(store))?)
}

/// A key or value given on the command line.
fn parse(text: &str, hex: bool) -> Result<Vec<u8>> {
    if !hex {
        return Ok(text.as_bytes().to_vec());
    }
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        bail!("{text:?} is not hex: an odd number of digits");
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
                .ok_or_else(|| anyhow!("{text:?} is not hex"))
        })
        .collect()
}

/// Bytes as shown: hex digits, or text with escapes.
fn show(bytes: &[u8], hex: bool) -> String {
    if hex {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    } else {
        shown(bytes)
    }
}

fn existing(trees: &Trees, name: &str) -> Result<Tree> {
    trees.tree(name)?.ok_or_else(|| anyhow!("no tree named {name:?}; `larder tree STORE ls` lists them"))
}

fn ls(trees: &Trees) -> Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{:<40} {:>14}", "TREE", "ENTRIES")?;
    for name in trees.list_trees()? {
        let len = existing(trees, &name)?.approximate_len()?;
        writeln!(out, "{:<40} {len:>14}", shown(name.as_bytes()))?;
    }
    Ok(out.flush()?)
}

fn get(trees: &Trees, tree: &str, key: &[u8], hex: bool) -> Result<()> {
    let value =
        existing(trees, tree)?.get(key)?.ok_or_else(|| anyhow!("no key {} in tree {tree:?}", show(key, hex)))?;
    let mut out = io::stdout().lock();
    writeln!(out, "{}", show(&value, hex))?;
    Ok(out.flush()?)
}

fn rm(trees: &Trees, tree: &str, key: &[u8], hex: bool) -> Result<()> {
    let t = existing(trees, tree)?;
    let mut tx = trees.write(larder_trees::Durability::Durable)?;
    if tx.get(&t, key)?.is_none() {
        bail!("no key {} in tree {tree:?}", show(key, hex));
    }
    tx.remove(&t, key)?;
    Ok(tx.commit()?)
}

/// The keys a scan covers.
struct Range {
    prefix: Option<Vec<u8>>,
    start: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
}

fn scan(trees: &Trees, tree: &str, range: &Range, forward: bool, limit: usize, hex: bool) -> Result<()> {
    let t = existing(trees, tree)?;
    let past_prefix = range.prefix.as_deref().and_then(prefix_end);
    let (start, end) = match &range.prefix {
        Some(p) => (Bound::Included(p.as_slice()), past_prefix.as_deref().map_or(Bound::Unbounded, Bound::Excluded)),
        None => (
            range.start.as_deref().map_or(Bound::Unbounded, Bound::Included),
            range.end.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
        ),
    };
    let mut out = io::stdout().lock();
    for kv in t.range((start, end), forward)?.take(limit) {
        let (k, v) = kv?;
        writeln!(out, "{}\t{}", show(&k, hex), show(&v, hex))?;
    }
    Ok(out.flush()?)
}
