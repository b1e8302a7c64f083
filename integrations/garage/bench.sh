#!/usr/bin/env bash
# S3 benchmark of the engines, peers in the same run: for each setup, a
# fresh cluster (cluster.sh start --nodes N), PutObject then GetObject from
# 8 client threads (s3-load/, a load generator in Rust: boto3 spent about
# a millisecond of CPU per request, a ceiling of its own on two cores), of
# 1 KiB objects (inlined in the metadata) and of 1 MiB objects (one data
# block each).
#
#   bench.sh [--seconds 15] [--nodes 1|3] [--rounds 3] [--out FILE]
#
# Setups: metadata_fsync and data_fsync on, then off; LMDB, SQLite and
# Larder metadata with file blocks, and Larder metadata with Larder blocks.
# The ceilings of the block stores, with fsync on, 1 MiB puts only: Larder
# metadata and the `discard` block store (it keeps names and no bytes, so
# it costs nothing: what Garage itself spends on a 1 MiB put), and the
# `raw` one (each block an overwrite of an already-written file and an
# fdatasync, the least a durable write costs: the physical ceiling).
# Each round runs every setup once, odd rounds in that order and even
# rounds in reverse, so a slow stretch of the machine does not fall on one
# setup. Prints one line per setup, size and round (the client's rates,
# operations/s) as it goes, kept in FILE (default run/bench-N-DATE.txt),
# then the medians over the rounds and the issue's ratios. Failed requests
# do not stop the run: each line counts them (put_failures, get_failures;
# client_exit=1 when any failed) and the summary lists the setups that had
# any.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
seconds=15 nodes=1 rounds=3 out=""
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --nodes) nodes="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "bench: unknown option $1" >&2; exit 2 ;;
    esac
done

. "$here/common.sh"

load="$here/s3-load/target/release/larder-s3-load"
cargo build --release --quiet --manifest-path "$here/s3-load/Cargo.toml"

mkdir -p "$here/run"
out="${out:-$here/run/bench-$nodes-$(date +%Y%m%d-%H%M%S).txt}"
: >"$out"

setups=()
for fsync in on off; do
    for setup in lmdb:file sqlite:file larder:file larder:larder; do
        setups+=("$fsync:$setup")
    done
done
setups+=("on:larder:discard" "on:larder:raw")

for round in $(seq 1 "$rounds"); do
    order=("${setups[@]}")
    if [ $((round % 2)) -eq 0 ]; then
        order=()
        for ((i = ${#setups[@]} - 1; i >= 0; i--)); do order+=("${setups[$i]}"); done
    fi
    for entry in "${order[@]}"; do
        IFS=: read -r fsync db blocks <<<"$entry"
        run="$here/run/bench-$nodes-$db-$blocks-$fsync-$(date +%s)"
        export GARAGE_CLUSTER_DIR="$run"
        trap '"$cluster" stop' EXIT
        "$cluster" start --db "$db" --blocks "$blocks" --fsync "$fsync" --nodes "$nodes" --dir "$run" >/dev/null
        sizes=(1024 1048576) only=()
        if [ "$blocks" = discard ] || [ "$blocks" = raw ]; then
            sizes=(1048576) only=(--puts-only)
        fi
        for size in "${sizes[@]}"; do
            # A failed request (SQLite's 503 "database is locked" under
            # load, say) is counted in the line, not the end of the run:
            # the client exits 1 after printing it.
            status=0
            result="$("$load" --size "$size" --seconds "$seconds" "${only[@]}")" || status=$?
            if [[ "$result" != "bench: "* ]]; then
                echo "bench: the load generator printed no result (exit status $status): counted as 0 operations/s" >&2
                result="bench: size=$size put_ops_per_s=0 get_ops_per_s=0 no_result=1"
            fi
            echo "round=$round nodes=$nodes fsync=$fsync db_engine=$db block_store=$blocks client_exit=$status ${result#bench: }" | tee -a "$out"
        done
        "$cluster" stop
        trap - EXIT
        rm -rf "$run"
    done
done

echo "bench: rounds in $out"
"$venv/bin/python" "$here/s3_load.py" summary "$out"
