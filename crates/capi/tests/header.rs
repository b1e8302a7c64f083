//! The checked-in headers are what cbindgen makes of the crate's source
//! now: include/larder_client.h of the client API (the files of src/),
//! include/larder_heap.h of the heap API (src/heap/). A change to the C
//! API that was not carried into its header fails here.

use std::path::{Path, PathBuf};

/// The client API's sources: the files directly in src/ but lib.rs (which
/// declares the heap's module too, and exports nothing itself).
fn client_sources(crate_dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(crate_dir.join("src"))
        .expect("list src/")
        .map(|entry| entry.expect("read src/").path())
        .filter(|path| path.is_file() && path.file_name().is_some_and(|n| n != "lib.rs"))
        .collect();
    files.sort();
    files
}

/// Generates the header `header` from `sources` with the cbindgen
/// configuration `config`; compares it with the checked-in one (or, with
/// LARDER_UPDATE_HEADER set, writes it).
fn check(config: &str, sources: &[PathBuf], header: &str) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join(config)).expect("the cbindgen configuration parses");
    let mut builder = cbindgen::Builder::new().with_config(config);
    for source in sources {
        builder = builder.with_src(source);
    }
    let bindings = builder.generate().expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let header = crate_dir.join("include").join(header);
    if std::env::var_os("LARDER_UPDATE_HEADER").is_some() {
        std::fs::write(&header, &generated).expect("write the header");
    }
    let checked_in = std::fs::read(&header).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is stale; regenerate it with `LARDER_UPDATE_HEADER=1 cargo test -p larder-capi --test header`",
        header.display()
    );
}

#[test]
fn the_checked_in_client_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    check("cbindgen.toml", &client_sources(crate_dir), "larder_client.h");
}

#[test]
fn the_checked_in_heap_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    check("cbindgen-heap.toml", &[crate_dir.join("src/heap/mod.rs")], "larder_heap.h");
}
