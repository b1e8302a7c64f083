#!/usr/bin/env bash
# The whole test suite: set-up, format and lint checks, then every test.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
# A one-off build gains nothing from incremental state (gigabytes of it).
export CARGO_INCREMENTAL=0
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The fuzz crate (fuzz/, its own workspace) keeps building on stable, and
# every target runs its committed seed corpus: libFuzzer with -runs=0 only
# executes the inputs given (fuzzing itself needs nightly; fuzz/README.md).
cargo build --manifest-path fuzz/Cargo.toml --target-dir fuzz/target --locked
for source in fuzz/fuzz_targets/*.rs; do
    target=$(basename "$source" .rs)
    if ! "fuzz/target/debug/$target" -runs=0 "fuzz/corpus/$target" >"fuzz/target/$target.log" 2>&1; then
        cat "fuzz/target/$target.log" >&2
        echo "test: fuzz target $target failed on its seed corpus" >&2
        exit 1
    fi
done
# The C library's tests (crates/capi/tests) compile C against
# liblarder.so and run it against `larder serve`: the larder binary
# they use is the one the next command builds for the CLI's tests, not a
# second build of it (with the test dependencies' features left out).
target_dir="${CARGO_TARGET_DIR:-target}"
case "$target_dir" in /*) ;; *) target_dir="$PWD/$target_dir" ;; esac
export LARDER_BIN="$target_dir/debug/larder"
# The Python bindings (a cdylib) are tested from Python, below.
cargo nextest run --workspace --exclude larder-python --locked --no-fail-fast
# Doc tests are not run by nextest.
cargo test --workspace --exclude larder-python --doc --locked
# The public crates' API docs build without a warning (broken or private
# links, missing docs: the crates deny missing_docs).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --locked --all-features \
    -p larder -p larder-io -p larder-index -p larder-log -p larder-space -p larder-object \
    -p larder-namespace -p larder-kv -p larder-heap -p larder-fs -p larder-fuse -p larder-fsck \
    -p larder-protocol -p larder-server -p larder-client
# The README's examples, copied into a new cargo project outside the
# workspace with one dependency on crates/larder, build and run.
./scripts/readme-new-project.sh
./scripts/test-python.sh
