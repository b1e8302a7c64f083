#!/usr/bin/env bash
# Crash test of the three-node cluster: an S3 write load (s3_load.py, boto3
# in a venv made here from PyPI) runs while node 2 is killed with SIGKILL
# and restarted; then every acknowledged object is read back through each
# node's endpoint, and node 2 must catch up (its resync queue drains and it
# holds as many objects as node 1).
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

venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet boto3
fi

run="$here/run/crash-$db-$blocks-fsync-$fsync-$(date +%s)"
export GARAGE_CLUSTER_DIR="$run"
cluster="$here/cluster.sh"
"$cluster" start --db "$db" --blocks "$blocks" --fsync "$fsync" --dir "$run"
trap '"$cluster" stop' EXIT

journal="$run/acknowledged.txt"
: >"$journal"
"$venv/bin/python" "$here/s3_load.py" write "$journal" --seconds "$seconds" &
load=$!

# Kill node 2 at evenly spaced moments of the load, each time for a few
# seconds, and restart it.
interval=$(( seconds / (kills + 1) ))
for k in $(seq 1 "$kills"); do
    sleep "$interval"
    before=$(wc -l <"$journal")
    "$cluster" kill 2
    echo "crash-test: SIGKILL node 2 (kill $k of $kills) after $before acknowledged puts"
    sleep 3
    "$cluster" restart 2
    echo "crash-test: node 2 restarted"
done
wait "$load"

echo "crash-test: $(wc -l <"$journal") acknowledged puts; verifying through every node"
"$venv/bin/python" "$here/s3_load.py" verify "$journal"

# Catch-up: node 2's tables and blocks converge with node 1's.
count_objects() {
    "$cluster" garage "$1" stats 2>/dev/null | awk '/^ *object/ { print $2; exit }'
}
for _ in $(seq 1 120); do
    queue="$("$cluster" garage 2 stats 2>/dev/null | awk -F: '/[Rr]esync queue length/ { gsub(/ /, "", $2); print $2; exit }')"
    one="$(count_objects 1)"
    two="$(count_objects 2)"
    if [ "${queue:-x}" = "0" ] && [ -n "$one" ] && [ "$one" = "$two" ]; then
        echo "crash-test: node 2 caught up: resync queue empty, $two objects as on node 1"
        exit 0
    fi
    sleep 1
done
echo "crash-test: node 2 did not catch up within 120 s (resync queue: ${queue:-?}, objects: node 1 ${one:-?}, node 2 ${two:-?})" >&2
"$cluster" garage 2 stats >&2 || true
exit 1
