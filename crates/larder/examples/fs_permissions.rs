//! The file system API: directories owned by different users, permission
//! checks as Linux makes them, and a directory listing.
//!
//! `cargo run -p larder --example fs_permissions [STORE_DIR]` (a new
//! temporary directory without one).

use std::path::Path;

use larder::fs::{errno, flags, Cred, Kind, SetAttr};
use larder::{ErrorKind, Options, Store};

const ALICE: u32 = 1000;
const BOB: u32 = 1001;
const STAFF: u32 = 100;

/// What the example did, for its test.
#[derive(Debug)]
pub struct Summary {
    /// The listing of `/home/alice`: (name, kind, mode bits, uid).
    pub listing: Vec<(String, Kind, u32, u32)>,
    /// The errno Bob's read of Alice's private file failed with.
    pub refused_errno: i32,
    /// What Bob read from the file Alice shared.
    pub shared_bytes: Vec<u8>,
}

/// Runs the example on the store in `dir` (created if missing).
pub fn run(dir: &Path) -> Result<Summary, larder::Error> {
    let store = Store::open(dir, Options::default())?;
    let fs = store.fs();
    let root = Cred::root();
    let alice = Cred::new(ALICE, STAFF, vec![]);
    let bob = Cred::new(BOB, STAFF, vec![]);

    // The superuser makes /home and gives Alice a home directory.
    let home = fs.mkdir(&root, fs.root(), b"home", 0o755)?;
    let alice_home = fs.mkdir(&root, home.ino, b"alice", 0o755)?;
    let set_owner = SetAttr { uid: Some(ALICE), gid: Some(STAFF), ..SetAttr::default() };
    fs.setattr(&root, alice_home.ino, &set_owner, None)?;
    println!("/home/alice belongs to uid {ALICE}, mode 755");

    // Bob may not create files there: the directory is not his.
    let refused = fs.create_file(&bob, alice_home.ino, b"bob-was-here", 0o644, flags::O_WRONLY);
    let Err(e) = refused else { panic!("bob created a file in alice's directory") };
    let e = larder::Error::from(e);
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    println!("bob creating /home/alice/bob-was-here: refused ({e})");

    // Alice writes a private file and a shared one.
    for (name, mode, text) in
        [(&b"diary.txt"[..], 0o600, &b"dear diary"[..]), (b"recipes.txt", 0o644, b"bread: flour, water, salt")]
    {
        let (_, handle) = fs.create_file(&alice, alice_home.ino, name, mode, flags::O_WRONLY)?;
        fs.write(&alice, handle, 0, text)?;
        fs.release(handle)?;
        println!("alice wrote /home/alice/{} (mode {mode:o})", String::from_utf8_lossy(name));
    }
    fs.mkdir(&alice, alice_home.ino, b"photos", 0o700)?;
    fs.sync()?;
    println!("sync: every change so far is durable");

    // Bob reads the shared file, and is refused the private one.
    let diary = fs.lookup(&bob, alice_home.ino, b"diary.txt")?;
    let refused_errno = match fs.open_file(&bob, diary.ino, flags::O_RDONLY) {
        Ok(_) => panic!("bob opened alice's private diary"),
        Err(e) => e.errno(),
    };
    assert_eq!(refused_errno, errno::EACCES);
    println!("bob opening diary.txt: EACCES");
    let recipes = fs.resolve(&bob, b"/home/alice/recipes.txt", true)?;
    let recipes = recipes.attr.map(|a| a.ino).ok_or_else(|| larder::Error::Fs(missing("recipes.txt")))?;
    let handle = fs.open_file(&bob, recipes, flags::O_RDONLY)?;
    let shared_bytes = fs.read(handle, 0, 4096)?;
    fs.release(handle)?;
    println!("bob read recipes.txt: {:?}", String::from_utf8_lossy(&shared_bytes));

    // Alice lists her directory: `.` and `..`, then the names in order.
    let listing_handle = fs.opendir(&alice, alice_home.ino)?;
    let mut listing = Vec::new();
    let mut offset = 0;
    loop {
        let entries = fs.readdir(listing_handle, offset, 64)?;
        let Some(last) = entries.last() else { break };
        offset = last.next;
        for entry in entries {
            if entry.name == b"." || entry.name == b".." {
                continue;
            }
            let attr = fs.getattr(entry.ino)?;
            let name = String::from_utf8_lossy(&entry.name).into_owned();
            println!("  {:<12} {:?} {:o} uid {}", name, entry.kind, attr.mode & 0o7777, attr.uid);
            listing.push((name, entry.kind, attr.mode & 0o7777, attr.uid));
        }
    }
    fs.releasedir(listing_handle)?;
    store.close()?;
    Ok(Summary { listing, refused_errno, shared_bytes })
}

fn missing(name: &str) -> larder::fs::FsError {
    larder::fs::FsError::posix(errno::ENOENT, format!("{name} is gone"))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temporary;
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            temporary = tempfile::tempdir()?;
            temporary.path().join("store")
        }
    };
    println!("store at {}", dir.display());
    run(&dir)?;
    Ok(())
}
