#!/usr/bin/env bash
# Installs what the peer engines of larder-bench need, if missing. Idempotent.
#
#   scripts/bench-deps.sh            # then:
#   cargo build -p larder-bench --release --features peers
#
# - RocksDB: the system library and headers (Debian 12: librocksdb-dev, 7.8),
#   linked by bench/build.rs; never built from source.
# - fjall: pure Rust, from crates.io: nothing to install.
# - LMDB: heed compiles LMDB's bundled C source: needs a C compiler.
# - `larder-bench fs`: bindfs (a peer through FUSE) and xfsprogs (the xfs
#   engine's mkfs); fuse3 comes from scripts/setup.sh.
# - perf (optional, --with-perf): linux-perf, to profile a child process.
set -euo pipefail

with_perf=0
for arg in "$@"; do
    case "$arg" in
        --with-perf) with_perf=1 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "unknown argument: $arg" >&2; exit 2 ;;
    esac
done

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

wanted=(librocksdb-dev pkg-config build-essential bindfs xfsprogs)
if [ "$with_perf" -eq 1 ]; then
    wanted+=(linux-perf)
fi

missing=()
for pkg in "${wanted[@]}"; do
    if installed "$pkg"; then
        echo "bench-deps: $pkg already installed ($(dpkg-query -W -f='${Version}' "$pkg"))"
    else
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "bench-deps: nothing to do"
    exit 0
fi

echo "bench-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
for pkg in "${missing[@]}"; do
    echo "bench-deps: installed $pkg ($(dpkg-query -W -f='${Version}' "$pkg"))"
done
