//! The checked-in header, include/larder_client.h, is what cbindgen makes
//! of the crate's source now: a change to the C API that was not carried
//! into the header fails here.

use std::path::Path;

#[test]
fn the_checked_in_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let header = crate_dir.join("include/larder_client.h");
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
