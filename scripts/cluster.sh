#!/usr/bin/env bash
# `make cluster`: a 3-node combined-mode cluster (process.roles=broker,controller)
# on one machine, in the foreground, each node's output prefixed with its
# id. Ctrl-C (or SIGTERM, or any node exiting) stops every node; a node is
# also sent SIGTERM by the kernel if this script dies without its trap
# running (setpriv --pdeathsig), so no node outlives it. The prefixing
# seds ignore Ctrl-C and end with their node's output, so what a node says
# while it stops is still shown.
#
# Node N (1-based) listens for clients on the Nth of CLUSTER_PORTS, serves
# the controller APIs on CLUSTER_CONTROLLER_PORTS, runs the metadata quorum
# (openraft) on CLUSTER_QUORUM_PORTS and its admin endpoint on
# CLUSTER_ADMIN_PORTS; data goes to $CLUSTER_DATA/N. Arguments are passed to
# every node (e.g. --set broker.session.timeout.ms=3000). With
# CLUSTER_STOP_ON_EXIT=0 a node that exits leaves the others running.
set -euo pipefail

bin=${GREGOR_BIN:?set GREGOR_BIN to the gregor binary}
plugins=${GREGOR_PLUGIN_DIR:-build/plugins}
data=${CLUSTER_DATA:-data/cluster}
host=${CLUSTER_HOST:-127.0.0.1}
read -r -a client <<<"${CLUSTER_PORTS:-9092 9093 9094}"
read -r -a controller <<<"${CLUSTER_CONTROLLER_PORTS:-19192 19193 19194}"
read -r -a quorum <<<"${CLUSTER_QUORUM_PORTS:-19092 19093 19094}"
read -r -a admin <<<"${CLUSTER_ADMIN_PORTS:-9645 9646 9647}"
# How long a stopping node may take before it is killed.
grace=${CLUSTER_STOP_SECONDS:-20}

count=${#client[@]}
for list in controller quorum admin; do
    declare -n ports=$list
    if [ "${#ports[@]}" -ne "$count" ]; then
        echo "cluster.sh: $count client ports but ${#ports[@]} $list ports" >&2
        exit 2
    fi
done

voters=""
for ((i = 0; i < count; i++)); do
    voters+="${voters:+,}$((i + 1))@$host:${quorum[i]}"
done

pids=()
stop() {
    trap - INT TERM HUP EXIT
    local pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    local deadline=$((SECONDS + grace))
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "cluster.sh: node pid $pid did not stop in ${grace}s: killed" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    wait 2>/dev/null || true
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM HUP
trap stop EXIT

echo "cluster.sh: $count nodes, bootstrap $(printf "$host:%s," "${client[@]}" | sed 's/,$//'), voters $voters"
for ((i = 0; i < count; i++)); do
    id=$((i + 1))
    mkdir -p "$data/$id"
    setpriv --pdeathsig TERM -- "$bin" serve \
        --set node.id=$id \
        --set process.roles=broker,controller \
        --set controller.quorum.voters=$voters \
        --set listeners=PLAINTEXT://$host:${client[i]},CONTROLLER://$host:${controller[i]} \
        --set listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT \
        --set controller.listener.names=CONTROLLER \
        --set inter.broker.listener.name=PLAINTEXT \
        --set log.dirs="$data/$id" \
        --set plugin.dir="$plugins" \
        --set admin.listener=$host:${admin[i]} \
        "$@" \
        > >(trap '' INT TERM; exec sed -u "s/^/[node $id] /") 2>&1 &
    pids+=("$!")
done

set +e
if [ "${CLUSTER_STOP_ON_EXIT:-1}" = 0 ]; then
    # Nodes may be killed and the others go on (bench/cluster.py).
    wait "${pids[@]}"
    exit 0
fi
# The first node to exit ends the cluster (its status is the script's).
wait -n "${pids[@]}"
status=$?
echo "cluster.sh: a node exited (status $status); stopping the others" >&2
exit "$status"
