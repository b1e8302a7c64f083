//! The engine keeps every invariant: a seeded workload of namespace and
//! object operations (create, mkdir, link, unlink with and without an open
//! handle, rmdir, writes small and large, truncates), with fsck clean after
//! every step, every object reading back what was written, and the same
//! after a reopen.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{creation, deterministic, fsck, read_all, storage, DIR};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_namespace::{NamespaceError, NamespaceTxn};
use larder_object::meta::{Kind, Name};
use larder_object::{Durability, ObjectError, Store, Transaction, ROOT_ID};

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Runs a namespace operation in a transaction holding `locks`.
fn ns<R>(store: &Store, locks: &[u64], f: impl FnOnce(&mut Transaction<'_>) -> Result<R, NamespaceError>) -> R {
    let out = store.transact(locks, Durability::Durable, |txn| {
        f(txn).map_err(|e| match e {
            NamespaceError::Object(o) => o,
            other => ObjectError::InvalidOption { name: "namespace operation", reason: other.to_string() },
        })
    });
    out.unwrap().0
}

/// What the workload expects: names and the bytes of every file.
#[derive(Default)]
struct Model {
    /// (directory, name) -> (child, is a directory).
    names: BTreeMap<(u64, Vec<u8>), (u64, bool)>,
    /// Directories, the root included.
    dirs: Vec<u64>,
    /// Bytes of every file that exists (named or open).
    files: BTreeMap<u64, Vec<u8>>,
    /// Unnamed files still open (orphans) to close later.
    open: Vec<u64>,
}

impl Model {
    fn entries(&self, dir: u64) -> usize {
        self.names.keys().filter(|(d, _)| *d == dir).count()
    }
}

fn bytes(rng: &mut Rng, seed: u64) -> Vec<u8> {
    let len = if rng.below(2) == 0 { 1 + rng.below(1500) } else { 3000 + rng.below(20_000) };
    (0..len).map(|i| (seed as u8).wrapping_add((i % 253) as u8)).collect()
}

fn step(store: &Store, m: &mut Model, rng: &mut Rng, i: u64) -> String {
    let name = Name::new(format!("n{i}").into_bytes()).unwrap();
    let dir = m.dirs[rng.below(m.dirs.len())];
    let files: Vec<u64> = m.files.keys().copied().collect();
    let named: Vec<_> = m.names.iter().map(|(k, v)| (k.clone(), *v)).collect();
    match rng.below(10) {
        0 => {
            let id = ns(store, &[dir], |t| t.create(dir, &name, Kind::Directory, 0o755, 0, 0));
            m.names.insert((dir, name.as_bytes().to_vec()), (id, true));
            m.dirs.push(id);
            format!("mkdir {dir}/{name} = {id}")
        }
        1 | 2 => {
            let data = bytes(rng, i);
            let id = ns(store, &[dir], |t| {
                let id = t.create(dir, &name, Kind::File, 0o644, 0, 0)?;
                t.write(id, 0, &data)?;
                Ok(id)
            });
            m.names.insert((dir, name.as_bytes().to_vec()), (id, false));
            m.files.insert(id, data);
            format!("create {dir}/{name} = {id}")
        }
        3 | 4 if !files.is_empty() => {
            let id = files[rng.below(files.len())];
            let data = bytes(rng, i);
            let offset = rng.below(30_000);
            store.write(id, offset as u64, &data, Durability::Durable).unwrap();
            let f = m.files.get_mut(&id).unwrap();
            if f.len() < offset + data.len() {
                f.resize(offset + data.len(), 0);
            }
            f[offset..offset + data.len()].copy_from_slice(&data);
            format!("write {id} at {offset} +{}", data.len())
        }
        5 if !files.is_empty() => {
            let id = files[rng.below(files.len())];
            let size = rng.below(25_000);
            store.truncate(id, size as u64, Durability::Durable).unwrap();
            m.files.get_mut(&id).unwrap().resize(size, 0);
            format!("truncate {id} to {size}")
        }
        6 => {
            let Some(((_, _), (id, _))) = named.iter().find(|(_, (c, is_dir))| !is_dir && m.files.contains_key(c))
            else {
                return "nothing to link".into();
            };
            let id = *id;
            ns(store, &[dir, id], |t| t.link(dir, &name, id));
            m.names.insert((dir, name.as_bytes().to_vec()), (id, false));
            format!("link {id} as {dir}/{name}")
        }
        7 | 8 if !named.is_empty() => {
            let ((d, n), (child, is_dir)) = named[rng.below(named.len())].clone();
            if is_dir && m.entries(child) > 0 {
                return "directory not empty".into();
            }
            let open = !is_dir && rng.below(2) == 0;
            let n = Name::new(n).unwrap();
            let gone = ns(store, &[d, child], |t| t.unlink(d, &n, child, open));
            m.names.remove(&(d, n.as_bytes().to_vec()));
            if is_dir {
                m.dirs.retain(|&x| x != child);
            } else if gone.nlink == 0 && gone.orphaned {
                m.open.push(child);
            } else if gone.nlink == 0 {
                m.files.remove(&child);
            }
            format!("unlink {d}/{n} ({child}, open {open}) -> {gone:?}")
        }
        9 => match m.open.pop() {
            Some(id) => {
                store.free_orphan(id, Durability::Durable).unwrap();
                m.files.remove(&id);
                format!("close orphan {id}")
            }
            None => "nothing open".into(),
        },
        _ => "nothing to change".into(),
    }
}

fn check(store: &Store, m: &Model, at: &str) {
    let r = fsck(store);
    assert!(r.is_clean(), "after {at}:\n{r}");
    for (&id, data) in &m.files {
        assert_eq!(&read_all(store, id).unwrap(), data, "after {at}: object {id}");
    }
}

/// Runs `steps` steps of the workload of `seed` on a new store on `sim`,
/// checking after each one if `check_each`.
fn workload(sim: &SimStorage, seed: u64, steps: u64, check_each: bool) -> (Store, Model) {
    let store = Store::create(storage(sim), Path::new(DIR), creation(), deterministic()).unwrap();
    let mut m = Model { dirs: vec![ROOT_ID], ..Model::default() };
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut log = Vec::new();
    for i in 0..steps {
        log.push(step(&store, &mut m, &mut rng, i));
        if check_each {
            check(&store, &m, &format!("seed {seed} step {i}: {}", log.join("\n")));
        }
    }
    (store, m)
}

/// Opens the store on `sim` after a restart or a crash: the orphans still
/// open are gone (no handle survives), everything else is as the model says.
fn reopen_and_check(sim: &SimStorage, mut m: Model, at: &str) {
    let store = Store::open(storage(sim), Path::new(DIR), deterministic()).unwrap();
    for id in m.open.drain(..) {
        m.files.remove(&id);
        assert!(store.stat(id).unwrap().is_none(), "{at}: orphan {id} survived the reopen");
    }
    check(&store, &m, at);
}

#[test]
fn namespace_and_object_operations_keep_every_invariant() {
    for seed in 1..=4u64 {
        let sim = SimStorage::new(seed);
        let (store, m) = workload(&sim, seed, 150, true);
        store.close().unwrap();
        reopen_and_check(&sim, m, &format!("seed {seed}: reopen"));
    }
}

#[test]
fn recovery_after_a_crash_keeps_every_invariant() {
    for (seed, steps) in [(5u64, 40u64), (6, 90), (7, 150)] {
        for mode in [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending] {
            let sim = SimStorage::new(seed);
            // Every step was durable before the next began, so the image
            // holds all of them, whatever the crash keeps of the rest.
            let (store, m) = workload(&sim, seed, steps, false);
            let image = sim.crash_with(mode);
            drop(store);
            reopen_and_check(&image, m, &format!("seed {seed}, {steps} steps, crash {mode:?}"));
        }
    }
}

#[test]
fn recovery_from_a_crash_inside_an_operation_keeps_every_invariant() {
    let mut crashed_inside = 0;
    for (seed, steps) in [(8u64, 30u64), (9, 80)] {
        for k in 1..=16 {
            let sim = SimStorage::new(seed);
            let (store, mut m) = workload(&sim, seed, steps, false);
            // The machine dies at the k-th write of the next steps: the
            // operation then fails (here: panics) halfway.
            sim.crash_after_writes(k);
            let mut rng = Rng(seed ^ k);
            // The failing operation panics (the workload unwraps); keep
            // the expected panics quiet.
            let hook = std::panic::take_hook();
            std::panic::set_hook(Box::new(|_| {}));
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                for i in 0..1000 {
                    step(&store, &mut m, &mut rng, steps + i);
                }
            }));
            std::panic::set_hook(hook);
            crashed_inside += usize::from(done.is_err());
            let image = sim.crash_with(CrashMode::Random);
            drop(store);
            let store = Store::open(storage(&image), Path::new(DIR), deterministic()).unwrap();
            let r = fsck(&store);
            assert!(r.is_clean(), "seed {seed}, {steps} steps, crash at write {k}:\n{r}");
        }
    }
    assert_eq!(crashed_inside, 32, "every run crashed inside an operation");
}

/// `Store::create_object` makes an anonymous orphan (docs/format.md section
/// 13, reason 2): if the caller crashes before linking it, the next open
/// frees it (rule 5 of section 15).
#[test]
fn an_object_created_without_a_name_is_an_orphan_until_linked() {
    let sim = SimStorage::new(60);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), deterministic()).unwrap();
    let id = store.create_object(Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    let r = fsck(&store);
    assert!(r.is_clean(), "{r}");
    // The caller dies before naming it: the next open must free it.
    let image = sim.crash_with(CrashMode::KeepAllPending);
    drop(store);
    let store = Store::open(storage(&image), Path::new(DIR), deterministic()).unwrap();
    assert!(store.stat(id).unwrap().is_none(), "object {id} leaked: no name, no orphan record");
}
