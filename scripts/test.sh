#!/usr/bin/env bash
# The whole test suite: set-up, format and lint checks, then every test.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo nextest run --workspace --locked --no-fail-fast
# Doc tests are not run by nextest.
cargo test --workspace --doc --locked
