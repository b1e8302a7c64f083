//! Runs every program in `examples/` on a new temporary directory and
//! checks what it reports, so the examples cannot fall behind the API.

#[allow(dead_code)]
#[path = "../examples/bulk_import.rs"]
mod bulk_import;
#[allow(dead_code)]
#[path = "../examples/fs_permissions.rs"]
mod fs_permissions;
#[allow(dead_code)]
#[path = "../examples/index_snapshots.rs"]
mod index_snapshots;
#[allow(dead_code)]
#[path = "../examples/kv_batches.rs"]
mod kv_batches;

use larder::fs::{errno, Kind};

fn temporary() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => panic!("cannot make a temporary directory: {e}"),
    }
}

#[test]
fn kv_batches_keeps_what_was_acknowledged() -> Result<(), larder::Error> {
    let tmp = temporary();
    let summary = kv_batches::run(&tmp.path().join("store"))?;
    let mut expected: Vec<String> = (1..20).map(|i| format!("2026/11/{i:02}")).collect();
    expected.extend((1..20).map(|i| format!("2026/12/{i:02}")));
    expected.push("2026/archive.log".into());
    expected.push("2026/summary".into());
    expected.sort();
    assert_eq!(summary.keys, expected);
    let line_bytes = "line 0000 of the archive\n".len() as u64;
    assert_eq!(summary.streamed_bytes, 1000 * line_bytes);
    Ok(())
}

#[test]
fn fs_permissions_refuses_and_lists() -> Result<(), larder::Error> {
    let tmp = temporary();
    let summary = fs_permissions::run(&tmp.path().join("store"))?;
    assert_eq!(summary.refused_errno, errno::EACCES);
    assert_eq!(summary.shared_bytes, b"bread: flour, water, salt");
    assert_eq!(
        summary.listing,
        [
            ("diary.txt".to_string(), Kind::File, 0o600, 1000),
            ("photos".to_string(), Kind::Directory, 0o700, 1000),
            ("recipes.txt".to_string(), Kind::File, 0o644, 1000),
        ]
    );
    Ok(())
}

#[test]
fn index_snapshots_sees_each_state() -> Result<(), larder::Error> {
    let tmp = temporary();
    let summary = index_snapshots::run(&tmp.path().join("index"))?;
    let users = ["user/ada", "user/alan", "user/barbara", "user/edsger", "user/grace"];
    assert_eq!(summary.snapshot_users, users);
    assert_eq!(summary.users_backward, ["user/alan", "user/ada"]);
    assert_eq!(summary.events_in_range, ["event/0003", "event/0004", "event/0005"]);
    assert_eq!(summary.durable_seq, 2);
    Ok(())
}

#[test]
fn bulk_import_creates_once() -> Result<(), larder::Error> {
    let tmp = temporary();
    let summary = bulk_import::run(&tmp.path().join("store"), 5_000)?;
    assert_eq!(summary.created, 5_000);
    assert_eq!(summary.duplicates, 500);
    assert_eq!(summary.scanned, 5_000);
    Ok(())
}
