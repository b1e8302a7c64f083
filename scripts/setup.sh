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

# The FUSE mount tests need /dev/fuse and fusermount3 (Debian's fuse3),
# run real programs on the mount (tar, git, make, gcc, sqlite3), and
# run commands on it as another user (setpriv, from util-linux). The fuzz
# crate's libfuzzer-sys builds libFuzzer with the C++ compiler (g++).
missing=""
for pair in fusermount3:fuse3 setpriv:util-linux tar:tar git:git make:make gcc:gcc c++:g++ sqlite3:sqlite3; do
    if ! command -v "${pair%%:*}" >/dev/null 2>&1; then
        missing="$missing ${pair##*:}"
    fi
done
if [ -n "$missing" ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        sudo="sudo"
    fi
    if command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing$missing for the mount tests"
        $sudo apt-get update -qq
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing
    else
        echo "setup: missing$missing and apt-get is not here; the mount tests will fail" >&2
    fi
fi

# POSIX suites run on the mount: pjdfstest (the Rust suite) and fsx.
for tool in pjdfstest fsx; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "setup: installing $tool (cargo install)"
        cargo install "$tool" --locked
    fi
done
# pjdfstest switches to the users nobody and tests.
if [ "$(id -u)" -eq 0 ] && ! id tests >/dev/null 2>&1; then
    echo "setup: creating the user and group 'tests' for pjdfstest"
    groupadd -f tests
    useradd -g tests -M -N -s /usr/sbin/nologin tests
fi
