#!/usr/bin/env bash
# Garage 2.5.0's own integration tests (the `integration` test of crate
# garage: S3, K2V, K2V client, admin API, buckets) against Larder.
#
#   integration-test.sh [--setups "larder/file larder/larder lmdb/file"]
#                       [--build-only] [-- ARGS for the test binary]
#
# Each setup is DB_ENGINE/BLOCK_STORE: the tests start one Garage node
# whose configuration takes db_engine from GARAGE_TEST_INTEGRATION_DB_ENGINE
# (Garage's own variable) and block_store from
# GARAGE_TEST_INTEGRATION_BLOCK_STORE (added by patches/garage.patch).
# lmdb/file is the control: Garage as released. The build is the dev
# profile without debug info (Garage's CI runs these tests unoptimized
# too), feature larder on top of Garage's defaults; one test binary serves
# every setup. Logs and the node's directories: run/integration/<setup>/.
# Exits non-zero if any setup has a failing test.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
setups="larder/file larder/larder lmdb/file"
build_only=no
while [ $# -gt 0 ]; do
    case "$1" in
    --setups) setups="$2"; shift 2 ;;
    --build-only) build_only=yes; shift ;;
    --) shift; break ;;
    *) echo "integration-test: unknown option $1" >&2; exit 2 ;;
    esac
done

[ -d crates/garage ] || ./prepare.sh
export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=0
# The test executable (cargo prints it as a JSON artifact), run directly
# for each setup so that cargo does not rebuild anything between setups.
exe="$(cargo test --locked -p garage --features larder --test integration --no-run \
    --message-format=json-render-diagnostics |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "integration" and m.get("executable"):
        print(m["executable"])
')"
if [ -z "$exe" ]; then
    echo "integration-test: the build produced no test executable" >&2
    exit 1
fi
echo "integration-test: $exe"
[ "$build_only" = yes ] && exit 0

out="$here/run/integration"
mkdir -p "$out"
status=0
for setup in $setups; do
    db="${setup%%/*}"
    blocks="${setup##*/}"
    name="$db-$blocks"
    log="$out/$name.log"
    echo "integration-test: db_engine=$db block_store=$blocks"
    set +e
    (cd crates/garage &&
        GARAGE_TEST_INTEGRATION_DB_ENGINE="$db" \
        GARAGE_TEST_INTEGRATION_BLOCK_STORE="$blocks" \
        GARAGE_TEST_INTEGRATION_PATH="$out/$name.node" \
        "$exe" "$@") >"$log" 2>&1
    result=$?
    set -e
    # The node's own log (it is removed with its directory by the next run).
    cp "$out/$name.node/stderr.log" "$out/$name.node.log" 2>/dev/null || true
    grep -E "^test .* \.\.\. (ok|FAILED|ignored.*)$" "$log" | sort >"$out/$name.tests"
    summary="$(grep -E "^test result:" "$log" | tail -n 1)"
    echo "integration-test: $name: ${summary:-no result (see $log)}"
    grep -E "^test .* FAILED$" "$log" || true
    [ "$result" -eq 0 ] || status=1
done
exit "$status"
