//! The store commands end to end through the built binary, each in a
//! temporary directory: a round trip through init, put, get, cat, ls, rm
//! and stats; refusals (a missing store, a locked one, an existing one, a
//! bad key, a missing key) that say what to do and change nothing; import
//! then export of a generated tree, byte for byte; fsck's exit codes; the
//! bench; and an import killed with SIGKILL whose every key reported
//! durable must be in the store intact.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use larder_kv::{Kv, KvOptions};

fn larder(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larder")).args(args).output().unwrap()
}

/// Runs larder with `input` on its stdin.
fn larder_with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_larder"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs larder and requires success, returning stdout.
fn ok(args: &[&str]) -> String {
    let o = larder(args);
    assert!(o.status.success(), "{args:?} failed: {}", stderr(&o));
    stdout(&o)
}

/// Runs larder and requires exit code 1 with `needles` in stderr.
fn refused(args: &[&str], needles: &[&str]) {
    let o = larder(args);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
    for n in needles {
        assert!(stderr(&o).contains(n), "{args:?}: {n:?} not in {}", stderr(&o));
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Bytes that differ from position to position, so a misplaced block shows.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Every regular file under `root` by relative path, with its bytes.
fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let t = fs::symlink_metadata(&p).unwrap().file_type();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() {
                out.insert(p.strip_prefix(root).unwrap().to_path_buf(), fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn init_put_get_cat_ls_rm_stats_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let st = tmp.path().join("store");
    let d = s(&st);
    assert!(ok(&["init", d]).contains(d));
    let file = tmp.path().join("value");
    fs::write(&file, b"from a file").unwrap();
    ok(&["put", d, "docs/a/one.txt", s(&file)]);
    let o = larder_with_stdin(&["put", d, "docs/a/two.txt", "-"], b"from stdin");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = larder_with_stdin(&["put", d, "docs/three", "--buffered"], b"stdin, no argument");
    assert!(o.status.success(), "{}", stderr(&o));
    // Above the streaming threshold: through the writer, from stdin.
    let big = pattern(9 << 20, 1);
    let o = larder_with_stdin(&["put", d, "other/big"], &big);
    assert!(o.status.success(), "{}", stderr(&o));

    assert_eq!(ok(&["get", d, "docs/a/one.txt"]), "from a file");
    assert_eq!(ok(&["cat", d, "docs/a/two.txt"]), "from stdin");
    assert_eq!(ok(&["cat", d, "docs/three"]), "stdin, no argument");
    let out = tmp.path().join("big.out");
    ok(&["get", d, "other/big", s(&out)]);
    assert!(fs::read(&out).unwrap() == big, "a streamed value came back different");
    assert!(larder(&["cat", d, "other/big"]).stdout == big);
    // Replacing a value.
    let o = larder_with_stdin(&["put", d, "docs/three"], b"replaced");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(ok(&["cat", d, "docs/three"]), "replaced");

    assert_eq!(ok(&["ls", d]), "docs\nother\n");
    let listing = ok(&["ls", d, "docs"]);
    let lines: Vec<(u64, &str)> = listing
        .lines()
        .map(|l| {
            let (size, key) = l.trim_start().split_once("  ").unwrap();
            (size.parse().unwrap(), key)
        })
        .collect();
    assert_eq!(lines, [(11, "a/one.txt"), (10, "a/two.txt"), (8, "three")]);
    assert_eq!(ok(&["ls", d, "docs/a/"]).lines().count(), 2);
    assert_eq!(ok(&["ls", d, "docs/t"]).lines().count(), 1);
    let o = larder(&["ls", d, "docs", "--limit", "2"]);
    assert_eq!(stdout(&o).lines().count(), 2);
    assert!(stderr(&o).contains("--limit"), "{}", stderr(&o));
    assert!(ok(&["ls", d, "--limit", "1"]) == "docs\n");

    let stats = ok(&["stats", d]);
    for needle in [
        "buckets:          2",
        "durable LSN",
        "space:",
        "runs:",
        "writes:           accepted",
        "larder-checkpoint  running",
        "larder-spares      running",
        "larder-log-flush   running",
        "larder-flush       running",
        "larder-merge-0     running",
    ] {
        assert!(stats.contains(needle), "{needle:?} not in {stats}");
    }

    ok(&["rm", d, "docs/a/one.txt"]);
    refused(&["get", d, "docs/a/one.txt"], &["no key \"a/one.txt\"", "bucket \"docs\"", d]);
    refused(&["rm", d, "docs/a/one.txt"], &["no key", "nothing deleted"]);
    refused(&["rm", "--bucket", d, "docs"], &["not empty", d]);
    ok(&["rm", d, "docs/a/two.txt"]);
    ok(&["rm", d, "docs/three"]);
    ok(&["rm", "--bucket", d, "docs"]);
    assert_eq!(ok(&["ls", d]), "other\n");
    refused(&["ls", d, "docs"], &["no bucket \"docs\""]);
}

#[test]
fn a_missing_store_is_named_with_what_to_do_and_not_created() {
    let tmp = tempfile::tempdir().unwrap();
    let st = tmp.path().join("nothing-here");
    let d = s(&st);
    let hint = format!("create one with `larder init {d}`");
    for args in [
        vec!["get", d, "b/k"],
        vec!["cat", d, "b/k"],
        vec!["ls", d],
        vec!["rm", d, "b/k"],
        vec!["stats", d],
        vec!["export", d, "b", s(tmp.path())],
        vec!["put", d, "b/k", "/dev/null"],
    ] {
        refused(&args, &[&format!("no store at {d}"), &hint]);
    }
    assert!(!st.exists(), "a command created the store directory");
}

#[test]
fn init_refuses_an_existing_store() {
    let tmp = tempfile::tempdir().unwrap();
    let d = s(tmp.path());
    ok(&["init", d]);
    ok(&["put", d, "b/k", "/dev/null"]);
    refused(&["init", d], &["a store already exists at", d]);
    assert_eq!(ok(&["ls", d]), "b\n", "the refused init changed the store");
}

#[test]
fn bad_and_missing_keys_are_refused_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let d = s(tmp.path());
    ok(&["init", d]);
    refused(&["put", d, "b/a//b", "/dev/null"], &["key \"a//b\" is refused", "doubled '/'"]);
    refused(&["put", d, "b/", "/dev/null"], &["names no key"]);
    refused(&["put", d, "b/x", "/no/such/file"], &["/no/such/file"]);
    assert_eq!(ok(&["ls", d]), "", "a refused put created its bucket");
    refused(&["get", d, "b/a//b"], &["is refused"]);
    ok(&["put", d, "b/k", "/dev/null"]);
    refused(&["get", d, "b/missing"], &["no key \"missing\"", "larder ls"]);
    refused(&["cat", d, "b/k/deeper"], &["no key"]);
    let out = tmp.path().join("out");
    refused(&["get", d, "b/missing", s(&out)], &["no key"]);
    assert!(!out.exists(), "get of a missing key created its output file");
    refused(&["get", d, "nobucket/k"], &["no bucket \"nobucket\""]);
}

#[test]
fn a_store_open_elsewhere_is_named_with_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let d = s(tmp.path());
    ok(&["init", d]);
    let kv = Kv::open(tmp.path(), KvOptions::default()).unwrap();
    refused(&["ls", d], &["open in another process", d, "retry"]);
    kv.close().unwrap();
    ok(&["ls", d]);
}

/// A tree with nested directories, an empty file, a 10 MiB file, names with
/// spaces, a symbolic link and a fifo.
fn make_tree(root: &Path) {
    fs::create_dir_all(root.join("a/b/c")).unwrap();
    fs::create_dir_all(root.join("with space/inner dir")).unwrap();
    fs::create_dir_all(root.join("empty dir")).unwrap();
    fs::write(root.join("top.txt"), b"top").unwrap();
    fs::write(root.join("a/empty"), b"").unwrap();
    fs::write(root.join("a/b/c/deep.bin"), pattern(5000, 2)).unwrap();
    fs::write(root.join("a/b/ten MiB.bin"), pattern(10 << 20, 3)).unwrap();
    fs::write(root.join("with space/inner dir/file name.txt"), b"spaces").unwrap();
    for i in 0..30 {
        fs::write(root.join(format!("a/b/f{i:02}")), pattern(i * 300, i as u64)).unwrap();
    }
    std::os::unix::fs::symlink("../top.txt", root.join("a/link to top")).unwrap();
    let fifo = root.join("a fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
}

#[test]
fn import_then_export_gives_the_tree_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (st, tree, out) = (tmp.path().join("store"), tmp.path().join("tree"), tmp.path().join("out"));
    make_tree(&tree);
    let d = s(&st);
    ok(&["init", d]);
    let o = larder(&["import", d, s(&tree), "photos", "--batch", "7"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("imported 35 files"), "{text}");
    assert!(text.contains("skipped 2 (1 symbolic links, 1 special files"), "{text}");
    assert!(stderr(&o).contains("skipped symbolic link") && stderr(&o).contains("link to top"), "{}", stderr(&o));
    assert!(stderr(&o).contains("skipped fifo"), "{}", stderr(&o));
    let durable: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("durable ")).collect();
    assert_eq!(durable.len(), 35, "every key is reported durable once");
    assert!(durable.contains(&"with space/inner dir/file name.txt"), "{durable:?}");
    assert_eq!(text.lines().filter(|l| l.starts_with("batch ")).count(), 5, "35 files, 7 a batch");

    let o = larder(&["export", d, "photos", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("exported 35 keys"), "{}", stdout(&o));
    let (want, got) = (files(&tree), files(&out));
    assert_eq!(want.keys().collect::<Vec<_>>(), got.keys().collect::<Vec<_>>());
    for (path, bytes) in &want {
        assert!(got[path] == *bytes, "{} differs after the round trip", path.display());
    }
    assert!(!out.join("a/link to top").exists(), "a symbolic link was imported");

    // An export does not overwrite files unless told to.
    refused(&["export", d, "photos/a/", s(&out)], &["it exists; --overwrite replaces it", "deep.bin"]);
    fs::write(out.join("a/empty"), b"changed").unwrap();
    ok(&["export", d, "photos/a/", s(&out), "--overwrite"]);
    assert_eq!(fs::read(out.join("a/empty")).unwrap(), b"");
    // A prefix exports only its keys.
    let part = tmp.path().join("part");
    ok(&["export", d, "photos/with", s(&part)]);
    assert_eq!(files(&part).keys().collect::<Vec<_>>(), [Path::new("with space/inner dir/file name.txt")]);

    // Importing again replaces the keys there and adds the new ones.
    fs::write(tree.join("top.txt"), b"top, changed").unwrap();
    fs::write(tree.join("a/b/f03"), pattern(7000, 9)).unwrap();
    fs::write(tree.join("a/new file"), b"new").unwrap();
    let text = ok(&["import", d, s(&tree), "photos"]);
    assert!(text.contains("imported 36 files") && text.contains("34 of them replacing"), "{text}");
    let again = tmp.path().join("again");
    ok(&["export", d, "photos", s(&again)]);
    assert_eq!(files(&again), files(&tree));
    let text = ok(&["fsck", d]);
    assert!(text.contains("clean"), "{text}");
}

#[test]
fn import_refuses_a_file_and_a_bucket_with_a_key() {
    let tmp = tempfile::tempdir().unwrap();
    let d = s(tmp.path());
    ok(&["init", d]);
    refused(&["import", d, "/etc/hostname", "b"], &["not a directory"]);
    refused(&["import", d, "/no/such/dir", "b"], &["/no/such/dir"]);
    fs::create_dir(tmp.path().join("src")).unwrap();
    refused(&["import", d, s(&tmp.path().join("src")), "b/k"], &["without '/'"]);
}

/// The container file and offset where `needle` first occurs, read a MiB
/// at a time (containers are large and mostly zero).
fn find_in_containers(data: &Path, needle: &[u8]) -> Option<(PathBuf, u64)> {
    for e in fs::read_dir(data).unwrap() {
        let path = e.unwrap().path();
        let f = fs::File::open(&path).unwrap();
        let (len, mut off) = (f.metadata().unwrap().len(), 0u64);
        let mut buf = vec![0u8; 1 << 20];
        while off < len {
            let n = buf.len().min((len - off) as usize);
            f.read_exact_at(&mut buf[..n], off).unwrap();
            if let Some(i) = buf[..n].windows(needle.len()).position(|w| w == needle) {
                return Some((path, off + i as u64));
            }
            // Overlap so a needle across two reads is found.
            off += (n - needle.len()) as u64;
        }
    }
    None
}

#[test]
fn fsck_exit_codes_say_clean_damaged_or_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let d = s(tmp.path());
    ok(&["init", d]);
    // A value in a container (above the inline limit), easy to find there.
    let value = pattern(8192, 9);
    let o = larder_with_stdin(&["put", d, "b/v"], &value);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = larder(&["fsck", d]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("0 problems") && stdout(&o).contains("is clean"), "{}", stdout(&o));

    // Flip one byte of the value where it lies in its container.
    let (path, at) = find_in_containers(&tmp.path().join("data"), &value[..64]).expect("the value is in a container");
    let f = fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let mut byte = [0u8];
    f.read_exact_at(&mut byte, at + 100).unwrap();
    f.write_all_at(&[byte[0] ^ 0xff], at + 100).unwrap();
    let o = larder(&["fsck", d]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("has 1 problems"), "{}", stdout(&o));

    let o = larder(&["fsck", s(&tmp.path().join("none"))]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no store at"), "{}", stderr(&o));
}

/// One flipped byte in superblock slot A (offset 4, in the magic, or 40, in
/// the uuid) leaves the store usable from slot B; fsck names the damaged
/// copy and `fsck --repair` rewrites it, after which fsck is clean.
#[test]
fn fsck_reports_a_damaged_superblock_copy_and_repair_rewrites_it() {
    for offset in [4u64, 40, 4096 + 40] {
        let tmp = tempfile::tempdir().unwrap();
        let d = s(tmp.path());
        ok(&["init", d]);
        let o = larder_with_stdin(&["put", d, "b/k"], b"kept");
        assert!(o.status.success(), "{}", stderr(&o));
        let sb = tmp.path().join("SUPERBLOCK");
        let f = fs::OpenOptions::new().read(true).write(true).open(&sb).unwrap();
        let mut byte = [0u8];
        f.read_exact_at(&mut byte, offset).unwrap();
        f.write_all_at(&[byte[0] ^ 0x01], offset).unwrap();
        drop(f);
        assert_eq!(ok(&["cat", d, "b/k"]), "kept", "offset {offset}: the store opens on the other copy");
        let o = larder(&["fsck", d]);
        assert_eq!(o.status.code(), Some(1), "offset {offset}: {}{}", stdout(&o), stderr(&o));
        let copy = if offset < 4096 { "superblock copy A" } else { "superblock copy B" };
        assert!(stdout(&o).contains(copy) && stdout(&o).contains(s(&sb)), "{}", stdout(&o));
        assert!(stdout(&o).contains("--repair"), "{}", stdout(&o));
        let o = larder(&["fsck", "--repair", d]);
        assert_eq!(o.status.code(), Some(0), "offset {offset}: {}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains(&format!("rewrote {copy}")), "{}", stdout(&o));
        assert!(stdout(&o).contains("is clean"), "{}", stdout(&o));
        let o = larder(&["fsck", d]);
        assert_eq!(o.status.code(), Some(0), "offset {offset}: {}{}", stdout(&o), stderr(&o));
        // Both copies are whole again: the same bytes in each slot.
        let bytes = fs::read(&sb).unwrap();
        assert_eq!(bytes[..4096], bytes[4096..], "offset {offset}");
    }
}

#[test]
fn bench_runs_its_steps_and_removes_its_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bench");
    let o = larder(&["bench", "--n", "300", "--durable", "5", "--dir", s(&dir)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for step in ["put ", "put durable", "get ", "scan ", "delete ", "reopen ", "155 keys", "counters:", "buckets:"] {
        assert!(text.contains(step), "{step:?} not in {text}");
    }
    assert!(!dir.exists(), "the bench left its store");
    let o = larder(&["bench", "store", "--n", "10", "--durable", "1", "--dir", s(&dir), "--keep"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(ok(&["ls", s(&dir.join("store"))]), "bench\n");
    refused(&["bench", "--n", "10", "--dir", s(&dir)], &["is not empty"]);
    let o =
        larder(&["bench", "index", "--n", "1000", "--gets", "10", "--scans", "10", "--dir", s(&tmp.path().join("i"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("larder bench index"), "{}", stdout(&o));
}

/// A tree of `n` small files in nested directories and a few files above
/// the streaming threshold among them.
fn make_many(root: &Path, n: usize) {
    for i in 0..n {
        let dir = root.join(format!("dir {:02}/sub_{}", i % 23, i % 3));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(format!("file number {i:05}.txt")), pattern(i * 37 % 9000, i as u64)).unwrap();
    }
    for k in 0..4 {
        fs::write(root.join(format!("dir {:02}/big {k}.bin", k * 5)), pattern((9 << 20) + k * 4099, 100 + k as u64))
            .unwrap();
    }
}

#[test]
fn every_key_an_import_reports_durable_survives_sigkill() {
    let tmp = tempfile::tempdir().unwrap();
    let (st, tree) = (tmp.path().join("store"), tmp.path().join("tree"));
    make_many(&tree, 3000);
    ok(&["init", s(&st)]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_larder"))
        .args(["import", s(&st), s(&tree), "b", "--batch", "40"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (mut durable, mut batches, mut killed, mut finished) = (Vec::new(), 0, false, false);
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        // A line cut by the kill promises nothing.
        let Some(l) = line.strip_suffix('\n') else { break };
        if let Some(k) = l.strip_prefix("durable ") {
            durable.push(k.to_string());
        } else if l.starts_with("batch ") {
            batches += 1;
        } else if l.starts_with("imported ") {
            finished = true;
        }
        if batches == 2 && !killed {
            child.kill().unwrap();
            killed = true;
        }
    }
    let status = child.wait().unwrap();
    assert!(!finished && status.signal() == Some(9), "the import ended before the kill: {status:?}");
    assert!(batches >= 2 && durable.len() >= 40, "{batches} batches, {} keys", durable.len());

    let kv = Kv::open(&st, KvOptions::default()).unwrap();
    for k in &durable {
        let want = fs::read(tree.join(k)).unwrap();
        let got = kv.get("b", k).unwrap();
        assert!(got.as_deref() == Some(&want[..]), "{k} was reported durable and is missing or wrong");
    }
    // Keys committed but not yet reported may be there too: whole, never torn.
    let mut present = 0;
    for e in kv.scan_prefix("b", b"").unwrap() {
        let e = e.unwrap();
        let k = String::from_utf8(e.key).unwrap();
        assert!(kv.get("b", &k).unwrap().unwrap() == fs::read(tree.join(&k)).unwrap(), "{k} is torn");
        present += 1;
    }
    assert!(present >= durable.len());
    kv.close().unwrap();
    let o = larder(&["fsck", s(&st)]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
}
