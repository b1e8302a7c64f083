#!/usr/bin/env bash
# Installs what building and testing Larder needs, when it is missing:
# cargo-nextest (the test runner). Idempotent; prints what it does.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo is missing; install the Rust toolchain (https://rustup.rs) first" >&2
    exit 1
fi

if ! cargo nextest --version >/dev/null 2>&1; then
    echo "setup: installing cargo-nextest"
    cargo install cargo-nextest --locked
fi

# rustfmt and clippy are part of the checks the test script runs.
if command -v rustup >/dev/null 2>&1; then
    for c in rustfmt clippy; do
        if ! rustup component list --installed 2>/dev/null | grep -q "^$c"; then
            echo "setup: adding rustup component $c"
            rustup component add "$c"
        fi
    done
fi

# The FUSE mount tests need /dev/fuse and fusermount3 (Debian's fuse3).
if ! command -v fusermount3 >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        sudo="sudo"
    fi
    if command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing fuse3 (fusermount3) for the mount tests"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq fuse3
    else
        echo "setup: fusermount3 is missing and apt-get is not here; mount tests will say they cannot mount" >&2
    fi
fi
