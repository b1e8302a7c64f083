#!/usr/bin/env bash
# Builds Garage 2.5.0 with Larder (feature `larder`: the metadata engine
# `db_engine = "larder"` and `block_store = "larder"`), release profile.
# The binary: integrations/garage/target/release/garage. Garage's default
# engines (LMDB, SQLite) stay in, for comparison and `garage convert-db`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
./prepare.sh
export CARGO_INCREMENTAL=0
cargo build --release --locked -p garage --features larder "$@"
cargo build --release --locked --manifest-path s3-load/Cargo.toml
echo "build: $here/target/release/garage and the load generator $here/s3-load/target/release/larder-s3-load"
