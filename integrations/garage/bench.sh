#!/usr/bin/env bash
# One-node S3 benchmark of the engines, peers in the same run: for each
# setup, a fresh single node (cluster.sh start --nodes 1), PutObject then
# GetObject from 8 client threads (s3_load.py bench), of 1 KiB objects
# (inlined in the metadata) and of 1 MiB objects (one data block each).
#
#   bench.sh [--seconds 15] [--nodes 1|3]
#
# Setups: metadata_fsync and data_fsync on, then off; LMDB, SQLite and
# Larder metadata with file blocks, and Larder metadata with Larder blocks.
# Prints one line per setup and size (the client's rates, operations/s).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
seconds=15 nodes=1
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --nodes) nodes="$2"; shift 2 ;;
    *) echo "bench: unknown option $1" >&2; exit 2 ;;
    esac
done

. "$here/common.sh"

for fsync in on off; do
    for setup in lmdb:file sqlite:file larder:file larder:larder; do
        db="${setup%%:*}" blocks="${setup##*:}"
        run="$here/run/bench-$nodes-$db-$blocks-$fsync-$(date +%s)"
        export GARAGE_CLUSTER_DIR="$run"
        "$cluster" start --db "$db" --blocks "$blocks" --fsync "$fsync" --nodes "$nodes" --dir "$run" >/dev/null
        for size in 1024 1048576; do
            result="$("$venv/bin/python" "$here/s3_load.py" bench --size "$size" --seconds "$seconds")"
            echo "nodes=$nodes fsync=$fsync db_engine=$db block_store=$blocks ${result#bench: }"
        done
        "$cluster" stop
        rm -rf "$run"
    done
done
