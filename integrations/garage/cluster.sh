#!/usr/bin/env bash
# A three-node Garage cluster on loopback, each node with its own
# directories (and, with the Larder engines, its own Larder stores).
#
#   cluster.sh start [--db larder|lmdb|sqlite] [--blocks larder|file|discard|raw]
#                    [--fsync on|off] [--nodes 3|1] [--dir DIR]
#                    [--rpc-timeout-msec MS]
#                                     start, connect, lay out, make a key and
#                                     a bucket (--nodes 1: one node,
#                                     replication factor 1, for benchmarks;
#                                     --rpc-timeout-msec: Garage's
#                                     rpc_timeout_msec, default 300000;
#                                     --blocks discard and raw keep no
#                                     block bytes: bench.sh's ceilings
#                                     only)
#   cluster.sh stop                   stop every node (SIGTERM, then wait)
#   cluster.sh kill N                 SIGKILL node N (1..3)
#   cluster.sh stop-node N            stop node N (SIGTERM, then wait)
#   cluster.sh restart N              start node N again (same directories)
#                                     and reconnect it to the others
#   cluster.sh env                    print the S3 endpoints and credentials
#   cluster.sh convert N ENGINE       stop node N, move its metadata to
#                                     ENGINE with `garage convert-db`, restart
#   cluster.sh garage N ARGS...       run the garage CLI against node N
#
# Defaults: --db larder --blocks larder --fsync on, DIR integrations/garage/run
# (or $GARAGE_CLUSTER_DIR). The binary: $GARAGE_BIN or target/release/garage
# (build.sh). Node N listens on 127.0.0.1: S3 3900+10N, RPC 3901+10N,
# admin 3903+10N.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
garage_bin="${GARAGE_BIN:-$here/target/release/garage}"
dir="${GARAGE_CLUSTER_DIR:-$here/run}"
nodes=(1 2 3)
# The nodes of the cluster in $dir (after start).
existing_nodes() {
    nodes=()
    for n in 1 2 3; do
        [ -d "$dir/node$n" ] && nodes+=("$n")
    done
    return 0
}

# Fixed credentials: a test cluster on loopback only.
key_id="GK0123456789abcdef01234567"
secret_key="0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
rpc_secret="4425f5c26c5e11581d3223904324dcb5b5d5dfb14e5e7f35e38c595424f5f1e6"
bucket="larder-test"
region="garage"

s3_port() { echo $((3900 + 10 * $1)); }
rpc_port() { echo $((3901 + 10 * $1)); }
admin_port() { echo $((3903 + 10 * $1)); }
conf() { echo "$dir/node$1/garage.toml"; }
cli() { local n="$1"; shift; "$garage_bin" -c "$(conf "$n")" "$@"; }

# Runs a command until it succeeds (the cluster needs a moment after
# connecting and after a layout change), at most 60 s; its output shown on
# the last failure.
retry() {
    local out
    for _ in $(seq 1 120); do
        if out="$("$@" 2>&1)"; then
            return 0
        fi
        sleep 0.5
    done
    echo "cluster: gave up on: $*" >&2
    echo "$out" >&2
    return 1
}

write_config() {
    local n="$1" db="$2" blocks="$3" fsync="$4" rpc_timeout="$5"
    mkdir -p "$dir/node$n/meta" "$dir/node$n/data"
    cat >"$(conf "$n")" <<EOF
metadata_dir = "$dir/node$n/meta"
data_dir = "$dir/node$n/data"
db_engine = "$db"
block_store = "$blocks"
metadata_fsync = $fsync
data_fsync = $fsync
replication_factor = ${#nodes[@]}
rpc_bind_addr = "127.0.0.1:$(rpc_port "$n")"
rpc_public_addr = "127.0.0.1:$(rpc_port "$n")"
rpc_secret = "$rpc_secret"
${rpc_timeout:+rpc_timeout_msec = $rpc_timeout}

[s3_api]
s3_region = "$region"
api_bind_addr = "127.0.0.1:$(s3_port "$n")"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:$(admin_port "$n")"
EOF
}

start_node() {
    local n="$1"
    local log="$dir/node$n/garage.log"
    RUST_LOG="${RUST_LOG:-garage=info}" nohup "$garage_bin" -c "$(conf "$n")" server >>"$log" 2>&1 &
    echo $! >"$dir/node$n/pid"
    # Ready when its RPC answers a status call.
    for _ in $(seq 1 300); do
        if cli "$n" status >/dev/null 2>&1; then
            return 0
        fi
        if ! kill -0 "$(cat "$dir/node$n/pid")" 2>/dev/null; then
            echo "cluster: node $n exited at start; its log:" >&2
            tail -n 30 "$log" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "cluster: node $n did not answer within 30 s; its log: $log" >&2
    return 1
}

# Waits until node $1 is connected to every other node of the cluster
# (a restarted node reconnects from its saved peer list), at most 60 s.
wait_connected() {
    local n="$1" out=""
    for _ in $(seq 1 120); do
        out="$(cli "$n" status 2>&1 || true)"
        if [[ "$out" == *"HEALTHY NODES"* ]] && [[ "$out" != *"FAILED NODES"* ]]; then
            return 0
        fi
        sleep 0.5
    done
    echo "cluster: node $n is not connected to every node after 60 s:" >&2
    echo "$out" >&2
    return 1
}

# Connects a restarted node $1 and every other running node both ways, as
# an operator would with `garage node connect`. Left alone, Garage takes up
# to 30 s: the other nodes retried the connection once when it went down,
# failed, and wait CONN_RETRY_INTERVAL (30 s, garage_net) before the next
# try; the restarted node reconnects from the peer list saved in its
# metadata directory, which Garage saves only every 60 s (DISCOVERY_INTERVAL,
# garage_rpc), so a node restarted within a minute of joining has none.
reconnect() {
    local n="$1" m id_n id_m
    existing_nodes
    id_n="$(cli "$n" node id -q)"
    for m in "${nodes[@]}"; do
        [ "$m" = "$n" ] && continue
        [ -f "$dir/node$m/pid" ] && kill -0 "$(cat "$dir/node$m/pid")" 2>/dev/null || continue
        id_m="$(cli "$m" node id -q)"
        retry cli "$n" node connect "$id_m"
        retry cli "$m" node connect "$id_n"
    done
}

stop_node() {
    local n="$1" pidfile="$dir/node$1/pid"
    [ -f "$pidfile" ] || return 0
    local pid
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 1 300); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "cluster: node $n ignored SIGTERM for 30 s; killing it" >&2
            kill -KILL "$pid"
        fi
    fi
    rm -f "$pidfile"
}

print_env() {
    local endpoints=""
    for n in "${nodes[@]}"; do endpoints+=" http://127.0.0.1:$(s3_port "$n")"; done
    echo "S3 endpoints:$endpoints"
    echo "region: $region"
    echo "bucket: $bucket"
    echo "AWS_ACCESS_KEY_ID=$key_id"
    echo "AWS_SECRET_ACCESS_KEY=$secret_key"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
start)
    db=larder blocks=larder fsync=true rpc_timeout=""
    while [ $# -gt 0 ]; do
        case "$1" in
        --db) db="$2"; shift 2 ;;
        --blocks) blocks="$2"; shift 2 ;;
        --fsync) case "$2" in on) fsync=true ;; off) fsync=false ;; *) echo "cluster: --fsync on|off" >&2; exit 2 ;; esac; shift 2 ;;
        --dir) dir="$2"; shift 2 ;;
        --rpc-timeout-msec) rpc_timeout="$2"; shift 2 ;;
        --nodes) case "$2" in 1) nodes=(1) ;; 3) nodes=(1 2 3) ;; *) echo "cluster: --nodes 1|3" >&2; exit 2 ;; esac; shift 2 ;;
        *) echo "cluster: unknown option $1" >&2; exit 2 ;;
        esac
    done
    if [ ! -x "$garage_bin" ]; then
        echo "cluster: no garage binary at $garage_bin (run build.sh, or set GARAGE_BIN)" >&2
        exit 1
    fi
    if [ -e "$dir/node1" ]; then
        echo "cluster: $dir already holds a cluster; stop it and remove the directory first" >&2
        exit 1
    fi
    mkdir -p "$dir"
    echo "$dir" >"$here/.cluster-dir"
    for n in "${nodes[@]}"; do
        write_config "$n" "$db" "$blocks" "$fsync" "$rpc_timeout"
        start_node "$n"
    done
    # Connect the other nodes to node 1, then give each a role.
    first_id="$(cli 1 node id -q)"
    for n in "${nodes[@]:1}"; do
        retry cli "$n" node connect "$first_id"
    done
    for n in "${nodes[@]}"; do
        id="$(cli "$n" node id -q)"
        cli 1 layout assign -z dc1 -c 10G "${id%%@*}" >/dev/null
    done
    cli 1 layout apply --version 1 >/dev/null
    retry cli 1 key import --yes -n larder-test "$key_id" "$secret_key"
    retry cli 1 bucket create "$bucket"
    retry cli 1 bucket allow --read --write --owner "$bucket" --key "$key_id"
    echo "cluster: ${#nodes[@]} node(s) up in $dir (db_engine=$db, block_store=$blocks, fsync=$fsync)"
    print_env
    ;;
stop)
    [ -f "$here/.cluster-dir" ] && dir="$(cat "$here/.cluster-dir")"
    existing_nodes
    for n in "${nodes[@]}"; do stop_node "$n"; done
    ;;
kill)
    [ -f "$here/.cluster-dir" ] && dir="$(cat "$here/.cluster-dir")"
    n="$1"
    kill -KILL "$(cat "$dir/node$n/pid")"
    rm -f "$dir/node$n/pid"
    ;;
stop-node)
    [ -f "$here/.cluster-dir" ] && dir="$(cat "$here/.cluster-dir")"
    stop_node "$1"
    ;;
restart)
    [ -f "$here/.cluster-dir" ] && dir="$(cat "$here/.cluster-dir")"
    start_node "$1"
    reconnect "$1"
    wait_connected "$1"
    ;;
env)
    [ -f "$here/.cluster-dir" ] && dir="$(cat "$here/.cluster-dir")"
    existing_nodes
    print_env
    ;;
convert)
    [ -f "$here/.cluster-dir" ] && dir="$(cat "$here/.cluster-dir")"
    n="$1" to="$2"
    from="$(sed -n 's/^db_engine = "\(.*\)"$/\1/p' "$(conf "$n")")"
    stop_node "$n"
    meta="$dir/node$n/meta"
    "$garage_bin" convert-db -a "$from" -i "$meta/db.$from" -b "$to" -o "$meta/db.$to"
    sed -i "s/^db_engine = .*/db_engine = \"$to\"/" "$(conf "$n")"
    mv "$meta/db.$from" "$meta/db.$from.converted"
    start_node "$n"
    reconnect "$n"
    wait_connected "$n"
    echo "cluster: node $n moved from $from to $to"
    ;;
garage)
    [ -f "$here/.cluster-dir" ] && dir="$(cat "$here/.cluster-dir")"
    n="$1"; shift
    cli "$n" "$@"
    ;;
*)
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
