#!/usr/bin/env bash
# Crash test of the three-node cluster: an S3 write load (s3_load.py, boto3
# in a venv made here from PyPI) runs while node 2 is killed with SIGKILL
# and restarted; then node 2 must catch up (after `garage repair tables`,
# its object, version and block-reference tables and block reference
# counts as large as node 1's) and every acknowledged object must read
# back, with the same SHA-256, through each node's endpoint.
#
#   crash-test.sh [--db larder|lmdb|sqlite] [--blocks larder|file]
#                 [--fsync on|off] [--seconds S] [--kills K]
#
# Defaults: larder, larder, on, 60 s of load, 2 kills of node 2. The
# cluster runs in a fresh directory under run/ and is stopped at the end.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
db=larder blocks=larder fsync=on seconds=60 kills=2
while [ $# -gt 0 ]; do
    case "$1" in
    --db) db="$2"; shift 2 ;;
    --blocks) blocks="$2"; shift 2 ;;
    --fsync) fsync="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --kills) kills="$2"; shift 2 ;;
    *) echo "crash-test: unknown option $1" >&2; exit 2 ;;
    esac
done

. "$here/common.sh"

use_cluster_run "crash-$db-$blocks-fsync-$fsync"
"$cluster" start --db "$db" --blocks "$blocks" --fsync "$fsync" --dir "$run"

journal="$run/acknowledged.txt"
: >"$journal"
"$venv/bin/python" "$here/s3_load.py" write "$journal" --seconds "$seconds" &
load=$!

# Kill node 2 at evenly spaced moments of the load (counted from its
# start), each time for a few seconds, and restart it; a kill whose moment
# falls after the load ended is not made (and said so).
interval=$(( seconds / (kills + 1) ))
started=$(date +%s)
made=0
for k in $(seq 1 "$kills"); do
    wait_s=$(( started + k * interval - $(date +%s) ))
    [ "$wait_s" -gt 0 ] && sleep "$wait_s"
    if ! kill -0 "$load" 2>/dev/null; then
        echo "crash-test: the load ended before kill $k; $made of $kills kills made during writes"
        break
    fi
    before=$(wc -l <"$journal")
    "$cluster" kill 2
    made=$((made + 1))
    echo "crash-test: SIGKILL node 2 during writes (kill $k of $kills) after $before acknowledged puts"
    sleep 3
    "$cluster" restart 2
    echo "crash-test: node 2 restarted"
done
wait "$load"

echo "crash-test: $(wc -l <"$journal") acknowledged puts"

# Catch-up, checked before any read (reads repair what they touch). Garage
# pushes missed table entries by anti-entropy sync, every 10 minutes or on
# demand: ask every node for a full sync now, then node 2's object,
# version and block-reference tables and its block reference counts must
# reach node 1's.
"$cluster" garage 1 repair --all-nodes --yes tables >/dev/null
summary() {
    "$cluster" garage "$1" stats 2>/dev/null | awk '
        $1 == "object" || $1 == "version" || $1 == "block_ref" { printf "%s=%s ", $1, $2 }
        /number of RC entries/ { split($0, f, ":"); split(f[2], g, " "); printf "rc=%s ", g[1] }'
}
caught_up=no
for i in $(seq 1 180); do
    one="$(summary 1)"
    two="$(summary 2)"
    if [ -n "$one" ] && [ "$one" = "$two" ]; then
        echo "crash-test: node 2 caught up ${i} s after the sync request: $two"
        caught_up=yes
        break
    fi
    sleep 1
done
if [ "$caught_up" = no ]; then
    echo "crash-test: node 2 did not catch up within 180 s: node 1 [$one], node 2 [$two]" >&2
fi

echo "crash-test: verifying every acknowledged object through every node"
"$venv/bin/python" "$here/s3_load.py" verify "$journal"
[ "$caught_up" = yes ]
