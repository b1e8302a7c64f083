#!/usr/bin/env bash
# Copies Garage 2.5.0's crates from cargo's registry into crates/ (not in
# git), applies Larder's patches and adds Larder's engine files. build.sh
# runs it; running it again starts from fresh registry copies.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

# The crates patched for Larder, each with patches/<crate>.patch.
patched=(garage_net garage_util garage_db garage_table garage_block garage_model garage)

# `cargo fetch` downloads Garage 2.5.0 and its crates into cargo's cache
# (checked against the registry's checksums); each copy is unpacked fresh
# from its .crate archive there.
# (It warns that `garage` has no library: it still downloads it.)
cargo fetch --manifest-path fetch/Cargo.toml --quiet
cache="${CARGO_HOME:-$HOME/.cargo}/registry/cache"

rm -rf crates
mkdir -p crates
for crate in "${patched[@]}"; do
    archive="$(ls "$cache"/*/"$crate-2.5.0.crate" 2>/dev/null | head -n 1 || true)"
    if [ -z "$archive" ]; then
        echo "prepare: $crate-2.5.0.crate not found in $cache" >&2
        exit 1
    fi
    tar -xzf "$archive" -C crates
    mv "crates/$crate-2.5.0" "crates/$crate"
    # The registry copy's own lock file and VCS marker would confuse cargo
    # inside this workspace; the workspace's Cargo.lock rules.
    rm -f "crates/$crate/Cargo.lock" "crates/$crate/.cargo_vcs_info.json"
    if [ -s "patches/$crate.patch" ]; then
        patch --quiet --forward --directory "crates/$crate" -p1 <"patches/$crate.patch"
    fi
done

# Larder's own files: the garage_db engine and its deferred durability, and
# the garage_block store.
cp larder/larder_adapter.rs crates/garage_db/larder_adapter.rs
cp larder/deferred.rs crates/garage_db/deferred.rs
cp larder/block_store.rs crates/garage_block/block_store.rs
cp larder/larder_block_store.rs crates/garage_block/larder_block_store.rs
cp larder/block_store_test.rs crates/garage_block/block_store_test.rs
