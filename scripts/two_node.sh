#!/usr/bin/env bash
# Two Ray nodes on this machine, one rayfl run on them, then stop them.
# The recipe of docs/cluster.md ("Two nodes on one machine"); tests/cluster/test_two_node.py
# runs the same `ray start` commands.
#
#   scripts/two_node.sh CONFIG [key=value ...]
#   scripts/two_node.sh examples/quickstart.yaml rounds=2 ray.clients_per_actor=10
#
# Needs the rayfl venv active (`ray`, `rayfl` and `python` on PATH).
# CPUS_PER_NODE (default 1) sets --num-cpus of each node, OBJECT_STORE_BYTES (default
# 1 GB) its object store; KEEP=1 leaves the cluster running after the run and prints
# how to use and stop it.
#
# Only this cluster's processes are ever stopped (by PID: those whose environment
# holds this cluster's RAY_TMPDIR). `ray stop` is not used: it kills every Ray
# instance on the machine, other people's included.
set -euo pipefail

if [ $# -lt 1 ]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
for cmd in ray rayfl python; do
    command -v "$cmd" >/dev/null || { echo "two_node.sh: '$cmd' not on PATH (activate the venv)" >&2; exit 2; }
done
CONFIG="$1"; shift
CPUS_PER_NODE="${CPUS_PER_NODE:-1}"
OBJECT_STORE_BYTES="${OBJECT_STORE_BYTES:-1000000000}"   # per node: must hold the dataset (float32)

# --- the recipe (docs/cluster.md) ---------------------------------------------------
export RAY_TMPDIR="$(mktemp -d /tmp/rayfl-2n-XXXXXX)"   # this cluster's sessions, sockets, logs
export RAY_AUTH_MODE=token                               # token auth on every node and driver
export RAY_AUTH_TOKEN_PATH="$RAY_TMPDIR/token"           # this cluster's own secret
export RAY_USAGE_STATS_ENABLED=0
(umask 077; python -c 'import secrets; print(secrets.token_hex(32), end="")' > "$RAY_AUTH_TOKEN_PATH")
# Free ports (Ray's defaults 6379, 10001, 8265, 52365 may belong to another Ray here).
read -r PORT CLIENT_PORT DASH_PORT HEAD_AGENT_PORT WORKER_AGENT_PORT < <(python -c '
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks: s.bind(("", 0))
print(*[s.getsockname()[1] for s in socks])')

stop_cluster() {
    local pids
    pids=$(grep -lzxF "RAY_TMPDIR=$RAY_TMPDIR" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true)
    if [ -n "$pids" ]; then
        kill -TERM $pids 2>/dev/null || true
        for _ in $(seq 20); do
            sleep 0.5
            pids=$(grep -lzxF "RAY_TMPDIR=$RAY_TMPDIR" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true)
            [ -z "$pids" ] && break
        done
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
    fi
    rm -rf "$RAY_TMPDIR"
    echo "two_node.sh: stopped the cluster of $RAY_TMPDIR"
}
[ "${KEEP:-0}" = 1 ] || trap stop_cluster EXIT

ray start --head --num-cpus "$CPUS_PER_NODE" --port "$PORT" \
    --dashboard-host 127.0.0.1 --include-dashboard false --dashboard-port "$DASH_PORT" \
    --ray-client-server-port "$CLIENT_PORT" --dashboard-agent-listen-port "$HEAD_AGENT_PORT" \
    --min-worker-port 0 --max-worker-port 0 --object-store-memory "$OBJECT_STORE_BYTES" \
    --temp-dir "$RAY_TMPDIR/head" --disable-usage-stats
ray start --address "127.0.0.1:$PORT" --num-cpus "$CPUS_PER_NODE" \
    --dashboard-agent-listen-port "$WORKER_AGENT_PORT" \
    --min-worker-port 0 --max-worker-port 0 --object-store-memory "$OBJECT_STORE_BYTES" \
    --temp-dir "$RAY_TMPDIR/worker" --disable-usage-stats
export RAY_ADDRESS="127.0.0.1:$PORT"
rayfl info --address auto
rayfl run "$CONFIG" ray.address=auto "$@"
# -------------------------------------------------------------------------------------

if [ "${KEEP:-0}" = 1 ]; then
    cat <<EOF
The cluster keeps running. To use it from another shell:
  export RAY_ADDRESS=$RAY_ADDRESS RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$RAY_AUTH_TOKEN_PATH
  rayfl run CONFIG ray.address=auto
To stop it (only it):
  kill -KILL \$(grep -lzxF "RAY_TMPDIR=$RAY_TMPDIR" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); rm -rf $RAY_TMPDIR
EOF
fi
