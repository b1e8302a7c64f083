#!/usr/bin/env bash
# For maintainers: rewrites patches/<crate>.patch from an edited copy of a
# crate. Usage: make-patches.sh ORIGINAL_DIR EDITED_DIR, each holding one
# directory per patched crate (the registry's 2.5.0 source, and the same
# with Larder's edits; Larder's own files, in larder/, are left out).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
original="$1"
edited="$2"
for crate in garage_net garage_util garage_db garage_table garage_block garage_model garage; do
    tmp="$(mktemp -d)"
    cp -r "$original/$crate" "$tmp/a"
    cp -r "$edited/$crate" "$tmp/b"
    rm -f "$tmp/b/larder_adapter.rs" "$tmp/b/deferred.rs" "$tmp/b/block_store.rs" "$tmp/b/larder_block_store.rs" "$tmp/b/block_store_test.rs"
    (cd "$tmp" && diff -ruN a b || [ $? -eq 1 ]) |
        sed -E "s/^(---|\+\+\+) ([^\t]+)\t.*/\1 \2/" >"$here/patches/$crate.patch"
    rm -rf "$tmp"
done
