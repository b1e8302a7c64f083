#!/usr/bin/env bash
# A node moved between metadata engines with `garage convert-db`: a
# three-node cluster on FROM takes an S3 write load, node 2 is converted to
# TO and back to FROM; after each move node 2 must hold the same tables
# (its object, version and block-reference counts as before the move) and
# every acknowledged object must read back through every node.
#
#   convert-test.sh [--from lmdb] [--to larder] [--blocks file|larder] [--seconds 20]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
from=lmdb to=larder blocks=file seconds=20
while [ $# -gt 0 ]; do
    case "$1" in
    --from) from="$2"; shift 2 ;;
    --to) to="$2"; shift 2 ;;
    --blocks) blocks="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    *) echo "convert-test: unknown option $1" >&2; exit 2 ;;
    esac
done

. "$here/common.sh"

use_cluster_run "convert-$from-$to"
"$cluster" start --db "$from" --blocks "$blocks" --fsync on --dir "$run"

journal="$run/acknowledged.txt"
: >"$journal"
"$venv/bin/python" "$here/s3_load.py" write "$journal" --seconds "$seconds"

# Node 2's table sizes as its own database reports them (`garage stats`),
# retried while the node is still starting.
tables() {
    local out=""
    for _ in $(seq 1 60); do
        out="$("$cluster" garage 2 stats 2>/dev/null | awk '$1 == "object" || $1 == "version" || $1 == "block_ref" { print $1, $2 }' || true)"
        [ -n "$out" ] && break
        sleep 0.5
    done
    echo "$out"
}
# Let the cluster settle (node 2 has applied every write it will get).
sleep 5
before="$(tables)"
echo "convert-test: node 2 tables on $from:"; echo "$before"
[ -n "$before" ] || { echo "convert-test: could not read node 2's table sizes" >&2; exit 1; }

for move in "$to" "$from"; do
    "$cluster" convert 2 "$move"
    after="$(tables)"
    if [ "$after" != "$before" ]; then
        echo "convert-test: node 2's tables differ after moving to $move:" >&2
        echo "$after" >&2
        exit 1
    fi
    echo "convert-test: node 2 on $move holds the same tables"
    "$venv/bin/python" "$here/s3_load.py" verify "$journal"
done
echo "convert-test: passed"
