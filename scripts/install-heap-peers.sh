#!/usr/bin/env bash
# Installs the peers of `larder-bench heap` when missing, then builds the peer
# programs of bench/peers (into bench/peers/build). Idempotent; outside the
# default build and CI.
#
#   scripts/install-heap-peers.sh     # then:
#   cargo run -p larder-bench --release --features larder-heap -- heap
#
# - locate workload: GNU findutils' `locate` (its frcode builds the LOCATE02
#   database) and `plocate` (plocate-build); mlocate is only a transitional
#   name for plocate on Debian 12.
# - allocator workload: libboost-dev (Boost.Interprocess managed_mapped_file,
#   headers only), libsphde-dev (SPHDE's SAS heap), libpmemobj-dev (PMDK's
#   libpmemobj on a plain file).
# - g++ and make to build the peer programs.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

wanted=(g++ make pkg-config locate plocate libboost-dev libsphde-dev libpmemobj-dev)
missing=()
for pkg in "${wanted[@]}"; do
    if installed "$pkg"; then
        echo "install-heap-peers: $pkg already installed ($(dpkg-query -W -f='${Version}' "$pkg"))"
    else
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -gt 0 ]; then
    echo "install-heap-peers: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
    for pkg in "${missing[@]}"; do
        echo "install-heap-peers: installed $pkg ($(dpkg-query -W -f='${Version}' "$pkg"))"
    done
fi

make -C "$here/bench/peers"
