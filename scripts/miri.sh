#!/usr/bin/env bash
# Miri over the unsafe code it can reach: the protocol crate's mapping of
# memory a client can write (copies made of atomic loads and stores, word
# views), its rings and the hostile-peer tests that race a writer against
# the server in one process. Needs the nightly toolchain with the miri and
# rust-src components (installed here when missing). Slow: 25-30 minutes
# on the 2-core VM while other builds run; not part of scripts/test.sh.
#
# Flags: -Zmiri-disable-isolation lets tests read /proc (the spinner's CPU
# count). -Zmiri-disable-weak-memory-emulation: Miri's store-buffer model
# cannot represent a byte store sequenced after a word store to the same
# place (it stops with an internal error), which the mapping's copies do
# in one thread; data races, including racing accesses of mixed sizes, are
# still reported. The descriptor tests (SCM_RIGHTS) are skipped: they fail
# in rustix's ancillary-buffer code under Stacked Borrows, not in ours.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
    rustup component add --toolchain nightly miri rust-src
fi
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation -Zmiri-disable-weak-memory-emulation}"
# Proptest cases are interpreted too: a handful reach the same code.
export PROPTEST_CASES="${PROPTEST_CASES:-4}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/miri}"
cargo +nightly miri test -p larder-protocol --lib --test ring --test hostile -- --skip descriptor
