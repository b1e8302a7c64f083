#!/usr/bin/env bash
# Scrub test of the three-node cluster: one data block of node 2 is damaged
# on disk (a byte flipped inside the block's bytes, wherever its block
# store keeps them: a Larder container or a block file), then Garage's
# scrub on node 2 must find it corrupted and resync must fetch a good copy
# from another node.
#
#   scrub-test.sh [--db larder|lmdb|sqlite] [--blocks larder|file]
#
# Defaults: larder, larder (--blocks file is the control: Garage's own
# file-per-block store). Steps: put a 700 KiB object of random bytes (one
# block, stored plain since random bytes do not compress), stop node 2,
# flip one byte of every copy of a 64-byte run from the middle of the block
# under its data directory, restart it; a first scrub must count one
# corruption, the block must come back (the undamaged bytes on node 2's
# disk again, the object read through node 2), and a second scrub must
# count no new one. The cluster runs under run/ and is stopped at the end.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
db=larder blocks=larder
while [ $# -gt 0 ]; do
    case "$1" in
    --db) db="$2"; shift 2 ;;
    --blocks) blocks="$2"; shift 2 ;;
    *) echo "scrub-test: unknown option $1" >&2; exit 2 ;;
    esac
done

. "$here/common.sh"

use_cluster_run "scrub-$db-$blocks"
# Garage checks every block 2 x rpc_timeout after its reference count
# rises (it may not have arrived) and keeps the later of two resync times,
# so a corrupted block found sooner after its write is fetched again only
# then: 10 minutes with the default rpc_timeout (300 s), 10 s here.
"$cluster" start --db "$db" --blocks "$blocks" --fsync on --dir "$run" --rpc-timeout-msec 5000

probe="$run/probe.bin"
head -c $((700 * 1024)) /dev/urandom >"$probe"
"$venv/bin/python" "$here/s3_load.py" put probe "$probe" --endpoint http://127.0.0.1:3910
# Garage's block hash: BLAKE2b-512 truncated to 32 bytes.
hash="$(python3 -c 'import hashlib,sys; print(hashlib.blake2b(open(sys.argv[1],"rb").read()).hexdigest()[:64])' "$probe")"
echo "scrub-test: probe object put, block $hash"
# Blocks written after it: bit rot hits a block the store has long
# acknowledged, not the newest write of its log (whose damaged data is,
# at recovery, indistinguishable from a write cut by a crash: the store
# drops that record, and the block is then absent, not corrupted).
for i in 1 2 3; do
    head -c $((200 * 1024)) /dev/urandom >"$run/after$i.bin"
    "$venv/bin/python" "$here/s3_load.py" put "after$i" "$run/after$i.bin" --endpoint http://127.0.0.1:3910
done

# Flips (with --damage) or counts the copies of the probe's 64 bytes at
# offset 358400 in the files under a node's data directory.
copies() {
    python3 - "$probe" "$1" "$2" <<'EOF'
import os, sys
probe, data_dir, mode = sys.argv[1], sys.argv[2], sys.argv[3]
needle = open(probe, "rb").read()[358400:358464]
count = 0
for root, _, files in os.walk(data_dir):
    for name in files:
        path = os.path.join(root, name)
        with open(path, "rb") as f:
            data = bytearray(f.read())
        at, changed = 0, False
        while (found := data.find(needle, at)) >= 0:
            count += 1
            if mode == "damage":
                data[found + 32] ^= 0xFF
                changed = True
            at = found + len(needle)
        if changed:
            with open(path, "r+b") as f:
                f.write(data)
print(count)
EOF
}

node2_data="$run/node2/data"
# The put returns at a quorum of two; the third copy follows at once.
stored=0
for _ in $(seq 1 20); do
    "$cluster" stop-node 2
    stored="$(copies "$node2_data" count)"
    [ "$stored" -ge 1 ] && break
    "$cluster" restart 2 >/dev/null
    sleep 1
done
if [ "$stored" -lt 1 ]; then
    echo "scrub-test: node 2 never stored the probe block" >&2
    exit 1
fi
damaged="$(copies "$node2_data" damage)"
echo "scrub-test: node 2 stopped; $damaged copy(ies) of the probe's bytes damaged under $node2_data"
[ "$(copies "$node2_data" count)" -eq 0 ]
"$cluster" restart 2
echo "scrub-test: node 2 restarted"

# Scrub node 2 at full speed and wait until it completes; its persistent
# error count is the scrub's count of corruptions detected.
g2() { "$cluster" garage 2 "$@"; }
g2 worker set scrub-tranquility 0 >/dev/null
scrub_tid() { g2 worker list | awk '/Block scrub worker/ { print $1; exit }'; }
scrub_errors() {
    g2 worker info "$(scrub_tid)" | awk -F: '/Persistent errors/ { gsub(/ /, "", $2); print $2 }'
}
run_scrub() {
    local before="$1" out
    g2 repair --yes scrub start >/dev/null
    for _ in $(seq 1 240); do
        out="$(g2 worker info "$(scrub_tid)")"
        if [[ "$out" == *"Last scrub completed at"* ]] && [[ "$out" != *"$before"* ]]; then
            echo "$out" | sed -n 's/.*Last scrub completed at \(.*\)/\1/p' | head -n 1
            return 0
        fi
        sleep 0.5
    done
    echo "scrub-test: scrub did not complete within 120 s:" >&2
    echo "$out" >&2
    return 1
}
last_completed() {
    g2 worker info "$(scrub_tid)" |
        sed -n 's/.*Last scrub completed at \(.*\)/\1/p' | head -n 1
}

errors_before="$(scrub_errors)"
completed="$(run_scrub "$(last_completed)")"
errors_after="$(scrub_errors)"
echo "scrub-test: first scrub completed at $completed; corruptions detected: $errors_before -> $errors_after"
if [ "$errors_after" != $((errors_before + 1)) ]; then
    echo "scrub-test: the scrub did not count the damaged block; node 2's log:" >&2
    grep -i "corrupt\|scrub\|$hash" "$run/node2/garage.log" | tail -n 20 >&2
    exit 1
fi

# Resync fetches the block from node 1 or 3: wait until node 2 says so,
# then until its copy is whole again (checked on disk, node stopped).
fetching="Resync block ${hash:0:16}: fetching absent but needed block"
for _ in $(seq 1 120); do
    grep -q "$fetching" "$run/node2/garage.log" && break
    sleep 0.5
done
if ! grep -q "$fetching" "$run/node2/garage.log"; then
    echo "scrub-test: node 2 did not start fetching the block again within 60 s" >&2
    exit 1
fi
repaired=no
for i in $(seq 1 30); do
    sleep 1
    "$cluster" stop-node 2
    if [ "$(copies "$node2_data" count)" -ge 1 ]; then
        repaired=yes
        echo "scrub-test: node 2 holds the block whole again (checked ${i} time(s))"
        "$cluster" restart 2 >/dev/null
        break
    fi
    "$cluster" restart 2 >/dev/null
done
if [ "$repaired" = no ]; then
    echo "scrub-test: node 2 did not get the block back within 30 tries; its log:" >&2
    grep -i "corrupt\|resync\|$hash" "$run/node2/garage.log" | tail -n 20 >&2
    exit 1
fi

errors_before="$(scrub_errors)"
completed="$(run_scrub "$completed")"
errors_after="$(scrub_errors)"
echo "scrub-test: second scrub completed at $completed; corruptions detected: $errors_before -> $errors_after"
[ "$errors_after" = "$errors_before" ]

"$venv/bin/python" "$here/s3_load.py" check probe "$probe" --endpoint http://127.0.0.1:3920
echo "scrub-test: passed (db_engine=$db, block_store=$blocks): the damaged block was detected by scrub and resynced"
grep -i "fails the block store's check\|is corrupted\|corrupt data block" "$run/node2/garage.log" | head -n 5
