//! `larder put|get|cat|rm|ls`: one key (or one bucket) at a time.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use crate::store::{shown, Address};
use crate::target::{Durability, Target};

/// Values above this many bytes stream through a writer rather than being
/// held in memory whole. The KV writer's chunk size (8 MiB, not exported by
/// larder-kv): smaller values would take the writer one write anyway, so a
/// single put costs no more memory and one transaction fewer.
pub(crate) const STREAM_ABOVE_BYTES: u64 = 8 << 20;

/// Bytes moved per read when copying a value out.
const COPY_BYTES: usize = 1 << 20;

/// Options of `larder put`.
#[derive(clap::Args, Debug)]
pub(crate) struct PutArgs {
    /// Store directory.
    store: PathBuf,
    /// Where to store the value: BUCKET/KEY (the bucket is created if missing).
    #[arg(value_name = "BUCKET/KEY")]
    target: String,
    /// File to read the value from; `-` or nothing reads stdin.
    #[arg(value_name = "FILE|-")]
    input: Option<PathBuf>,
    /// Return before the value is durable (it is within milliseconds, or at
    /// the store's close when this command exits); default: durable.
    #[arg(long)]
    buffered: bool,
}

/// Options of `larder get`.
#[derive(clap::Args, Debug)]
pub(crate) struct GetArgs {
    /// Store directory.
    store: PathBuf,
    /// BUCKET/KEY to read.
    #[arg(value_name = "BUCKET/KEY")]
    source: String,
    /// File to write the value to (created or replaced); `-` or nothing writes stdout.
    #[arg(value_name = "OUTFILE")]
    output: Option<PathBuf>,
}

/// Options of `larder cat`.
#[derive(clap::Args, Debug)]
pub(crate) struct CatArgs {
    /// Store directory.
    store: PathBuf,
    /// BUCKET/KEY to print.
    #[arg(value_name = "BUCKET/KEY")]
    source: String,
}

/// Options of `larder rm`.
#[derive(clap::Args, Debug)]
pub(crate) struct RmArgs {
    /// Store directory.
    store: PathBuf,
    /// BUCKET/KEY to delete, or with --bucket the BUCKET.
    #[arg(value_name = "BUCKET/KEY")]
    target: String,
    /// Delete the bucket TARGET, which must be empty.
    #[arg(long)]
    bucket: bool,
}

/// Options of `larder ls`.
#[derive(clap::Args, Debug)]
pub(crate) struct LsArgs {
    /// Store directory.
    store: PathBuf,
    /// BUCKET or BUCKET/PREFIX whose keys to list (sizes first); nothing lists the buckets.
    #[arg(value_name = "BUCKET[/PREFIX]")]
    target: Option<String>,
    /// List at most this many.
    #[arg(long)]
    limit: Option<usize>,
}

/// `larder put`.
pub(crate) fn put(args: &PutArgs) -> Result<()> {
    let addr = Address::parse_key(&args.target)?;
    // The input is opened before the store so a wrong path changes nothing.
    let (mut input, name): (Box<dyn Read>, String) = match &args.input {
        Some(p) if p.as_os_str() != "-" => {
            let f = File::open(p).with_context(|| format!("opening {} to read the value", p.display()))?;
            (Box::new(f), p.display().to_string())
        }
        _ => (Box::new(io::stdin().lock()), "stdin".to_string()),
    };
    let durability = if args.buffered { Durability::Buffered } else { Durability::Durable };
    let target = Target::open(&args.store)?;
    target.ensure_bucket(&addr.bucket)?;
    put_from(&target, &addr, &mut input, durability).with_context(|| {
        format!(
            "storing {name} as {}/{} in the store at {}",
            addr.bucket,
            shown(addr.key.as_bytes()),
            args.store.display()
        )
    })?;
    target.close(&args.store)
}

/// Stores what `input` holds under `addr`: small values in one put, larger
/// ones streamed through a writer without holding them whole.
fn put_from(target: &Target, addr: &Address, input: &mut dyn Read, durability: Durability) -> Result<()> {
    let mut head = Vec::new();
    input.take(STREAM_ABOVE_BYTES + 1).read_to_end(&mut head).context("reading the value")?;
    let key = addr.key.as_bytes();
    if head.len() as u64 <= STREAM_ABOVE_BYTES {
        return target.put(&addr.bucket, key, &head, durability);
    }
    let mut w = target.writer(&addr.bucket, key, durability)?;
    w.write_all(&head)?;
    drop(head);
    copy(input, &mut w)?;
    w.finish()
}

/// Copies `from` into `to` in large reads (each read of a value is a
/// lookup and a checksum check, so small ones would be slow).
pub(crate) fn copy(from: &mut dyn Read, to: &mut dyn Write) -> Result<u64> {
    let mut buf = vec![0u8; COPY_BYTES];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("reading"),
        };
        to.write_all(&buf[..n]).context("writing")?;
        total += n as u64;
    }
}

/// A reader of the value at `addr`, or an error naming what is missing.
pub(crate) fn reader<'a>(target: &'a Target, addr: &Address, dir: &Path) -> Result<Box<dyn Read + 'a>> {
    let found = target
        .reader(&addr.bucket, addr.key.as_bytes())
        .with_context(|| format!("in the store at {}", dir.display()))?;
    found.map(|(r, _)| r).ok_or_else(|| {
        anyhow!(
            "no key {:?} in bucket {:?} of the store at {}; `larder ls {} {}` lists its keys",
            shown(addr.key.as_bytes()),
            addr.bucket,
            dir.display(),
            dir.display(),
            addr.bucket
        )
    })
}

/// `larder get`.
pub(crate) fn get(args: &GetArgs) -> Result<()> {
    let addr = Address::parse_key(&args.source)?;
    let target = Target::open(&args.store)?;
    {
        let mut r = reader(&target, &addr, &args.store)?;
        match &args.output {
            // The file is made only once the key is known to exist.
            Some(p) if p.as_os_str() != "-" => {
                let mut f = File::create(p).with_context(|| format!("creating {}", p.display()))?;
                copy(&mut r, &mut f).with_context(|| format!("copying {} into {}", args.source, p.display()))?;
                f.sync_all().with_context(|| format!("syncing {}", p.display()))?;
            }
            _ => to_stdout(&mut r, &args.source)?,
        }
    }
    target.close(&args.store)
}

/// `larder cat`.
pub(crate) fn cat(args: &CatArgs) -> Result<()> {
    let addr = Address::parse_key(&args.source)?;
    let target = Target::open(&args.store)?;
    {
        let mut r = reader(&target, &addr, &args.store)?;
        to_stdout(&mut r, &args.source)?;
    }
    target.close(&args.store)
}

fn to_stdout(r: &mut dyn Read, what: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    copy(r, &mut out).with_context(|| format!("copying {what} to stdout"))?;
    out.flush().context("writing stdout")
}

/// `larder rm`.
pub(crate) fn rm(args: &RmArgs) -> Result<()> {
    let target = Target::open(&args.store)?;
    let d = args.store.display();
    if args.bucket {
        let bucket = &args.target;
        target.delete_bucket(bucket).with_context(|| format!("deleting bucket {bucket:?} of the store at {d}"))?;
    } else {
        let addr = Address::parse_key(&args.target)?;
        let key = shown(addr.key.as_bytes());
        let found = target
            .delete(&addr.bucket, addr.key.as_bytes(), Durability::Durable)
            .with_context(|| format!("deleting {key:?} from bucket {:?} of the store at {d}", addr.bucket))?;
        if !found {
            bail!("no key {key:?} in bucket {:?} of the store at {d}; nothing deleted", addr.bucket);
        }
    }
    target.close(&args.store)
}

/// `larder ls`.
pub(crate) fn ls(args: &LsArgs) -> Result<()> {
    let target = Target::open(&args.store)?;
    let limit = args.limit.unwrap_or(usize::MAX);
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut more = false;
    match &args.target {
        None => {
            let buckets = target.buckets().with_context(|| format!("listing the store at {}", args.store.display()))?;
            more = buckets.len() > limit;
            for b in buckets.iter().take(limit) {
                writeln!(out, "{}", shown(b)).context("writing stdout")?;
            }
        }
        Some(what) => {
            let addr = Address::parse(what)?;
            let ctx = || format!("listing {what} in the store at {}", args.store.display());
            for (listed, entry) in target.scan_prefix(&addr.bucket, addr.key.as_bytes()).with_context(ctx)?.enumerate()
            {
                if listed == limit {
                    more = true;
                    break;
                }
                let e = entry.with_context(ctx)?;
                writeln!(out, "{:>12}  {}", e.size, shown(&e.key)).context("writing stdout")?;
            }
        }
    }
    out.flush().context("writing stdout")?;
    if more {
        eprintln!("(stopped at --limit {limit}; there are more)");
    }
    target.close(&args.store)
}
