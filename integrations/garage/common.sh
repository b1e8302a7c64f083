# Sourced by the scripts that drive a Garage cluster (crash-test.sh,
# scrub-test.sh, convert-test.sh, bench.sh); expects `here` set to this
# directory.

# The S3 client's Python: a virtual environment with boto3 from PyPI,
# made here on first use.
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet boto3
fi
cluster="$here/cluster.sh"

# use_cluster_run NAME: sets `run` to a fresh directory for a cluster
# named NAME under run/, points cluster.sh at it, and stops that cluster
# when the script exits.
use_cluster_run() {
    run="$here/run/$1-$(date +%s)"
    export GARAGE_CLUSTER_DIR="$run"
    trap '"$cluster" stop' EXIT
}
