#!/usr/bin/env bash
# `make librdkafka-test`: librdkafka's own regression tests (its tests/
# directory, e.g. 0103-transactions.c) against a `scripts/cluster.sh`
# cluster. They are the reference client's view of the broker, written
# against Apache Kafka, so a failure is a difference from Kafka that our
# own tests did not think to check. Not part of `make test`: building
# librdkafka's test runner takes minutes.
#
# Usage: scripts/librdkafka_test.sh [TESTS]   (default 0103; a comma list
# such as 0103,0098 as librdkafka's TESTS takes)
#
# The test runner is built once from the librdkafka sources the rdkafka-sys
# crate ships (the version Cargo.lock pins) under $LIBRDKAFKA_TEST_DIR
# (default $CARGO_TARGET_DIR/librdkafka-tests); the registry copy is never
# written to. The cluster gets free ports (another broker on 9092 does not
# matter) and a fresh data directory; it is stopped when the script ends.
# Environment: TEST_KAFKA_VERSION (default 3.9.0, the Kafka version the
# tests gate features on), SUBTESTS (librdkafka's subtest filter),
# LIBRDKAFKA_TEST_ARGS (extra test-runner flags, e.g. -Q), TEST_DEBUG,
# CLUSTER_START_SECONDS (how long the cluster may take to come up, 300),
# KEEP_DATA=1 (keep the cluster's data and logs), LIBRDKAFKA_REBUILD=1
# (build the runner again, e.g. after installing rapidjson-dev for 0098).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=$(realpath -m "${CARGO_TARGET_DIR:-$root/target}")
export GREGOR_BIN=${GREGOR_BIN:-$target/release/gregor}
export GREGOR_PLUGIN_DIR=${GREGOR_PLUGIN_DIR:-$root/build/plugins}
build_dir=$(realpath -m "${LIBRDKAFKA_TEST_DIR:-$target/librdkafka-tests}")
tests=${1:-0103}

[ -x "$GREGOR_BIN" ] || { echo "librdkafka_test.sh: no gregor binary at $GREGOR_BIN (make build)" >&2; exit 2; }
command -v kcat >/dev/null || { echo "librdkafka_test.sh: needs kcat (bash .ci/deps.sh)" >&2; exit 2; }
[ -d "$GREGOR_PLUGIN_DIR" ] || { echo "librdkafka_test.sh: no plugin dir $GREGOR_PLUGIN_DIR (make build)" >&2; exit 2; }

# --- librdkafka sources: the rdkafka-sys version Cargo.lock pins ---------
version=$(awk '/^name = "rdkafka-sys"$/ { getline; gsub(/"/, "", $3); print $3; exit }' "$root/Cargo.lock")
[ -n "$version" ] || { echo "librdkafka_test.sh: rdkafka-sys not in Cargo.lock" >&2; exit 2; }
src=""
for dir in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/rdkafka-sys-"$version"/librdkafka; do
    [ -d "$dir/tests" ] && src=$dir
done
if [ -z "$src" ]; then
    echo "librdkafka_test.sh: rdkafka-sys $version sources not in the cargo registry (cargo fetch)" >&2
    exit 2
fi

# --- build the test runner once -------------------------------------------
tree=$build_dir/librdkafka-$version
runner=$tree/tests/test-runner
if [ ! -x "$runner" ] || [ "${LIBRDKAFKA_REBUILD:-0}" = 1 ]; then
    echo "librdkafka_test.sh: building librdkafka $version's test runner in $tree (once; minutes)"
    rm -rf "$tree"
    mkdir -p "$build_dir"
    cp -a "$src" "$tree"
    chmod -R u+w "$tree"
    # 0098 (transactional consume) runs its scenarios twice: with Apache
    # Kafka's Java producer (java/TransactionProducerCli, needs KAFKA_PATH,
    # a Kafka install with its client jars, which this machine cannot
    # fetch) and with librdkafka's producer. Without KAFKA_PATH the Java
    # half would fail on its missing input, so it is skipped; the
    # librdkafka half runs as written. (0098 needs RapidJSON, rapidjson-dev,
    # at build time; without it the whole test skips.)
    python3 - "$tree/tests/0098-consumer-txn.cpp" <<'PATCH'
import sys
path = sys.argv[1]
java_half = "  do_test_consumer_txn_test(true /* with java producer */);\n"
text = open(path).read()
if text.count(java_half) != 1:
    sys.exit(f"librdkafka_test.sh: 0098's Java producer call not found in {path}")
text = text.replace(java_half, (
    '  if (test_getenv("KAFKA_PATH", NULL))\n'
    + "  " + java_half
    + "  else\n"
    + '    Test::Say("KAFKA_PATH not set: skipping the Java producer half\\n");\n'))
open(path, "w").write(text)
PATCH
    (
        cd "$tree"
        # No Kerberos or HTTP client: the tests that need them skip. The
        # logs go outside the tree: mklove loads any ./configure.* as a module.
        ./configure --disable-gssapi --disable-curl >../configure.txt 2>&1 ||
            { tail -30 ../configure.txt; exit 1; }
        make -j"$(nproc)" libs >../build.txt 2>&1 || { tail -30 ../build.txt; exit 1; }
        make -j"$(nproc)" -C tests test-runner >>../build.txt 2>&1 || { tail -30 ../build.txt; exit 1; }
    )
fi

# --- a cluster on free ports -----------------------------------------------
read -r -a ports <<<"$(python3 - <<'EOF'
import socket
socks = []
for _ in range(12):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
)"
client="${ports[*]:0:3}"
data=$(mktemp -d "${TMPDIR:-/tmp}/gregor-librdkafka.XXXXXX")
log=$data/cluster.log
cluster_pid=""
finish() {
    local status=$?
    if [ -n "$cluster_pid" ]; then
        kill -TERM "$cluster_pid" 2>/dev/null || true
        wait "$cluster_pid" 2>/dev/null || true
    fi
    if [ "${KEEP_DATA:-0}" = 1 ] || [ "$status" -ne 0 ]; then
        echo "librdkafka_test.sh: cluster data and log kept in $data"
    else
        rm -rf "$data"
    fi
    exit "$status"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

CLUSTER_DATA=$data \
    CLUSTER_PORTS="$client" \
    CLUSTER_CONTROLLER_PORTS="${ports[*]:3:3}" \
    CLUSTER_QUORUM_PORTS="${ports[*]:6:3}" \
    CLUSTER_ADMIN_PORTS="${ports[*]:9:3}" \
    "$root/scripts/cluster.sh" >"$log" 2>&1 &
cluster_pid=$!

# A node opens its client listener once it has caught up with the metadata
# log, so three open listeners are a cluster that answers. The wait is long
# because a first start with a cold plugin compile cache (~/.cache/gregor,
# or after the plugins were rebuilt) has each of the three nodes compile
# every plugin at once: 2 min 40 s here on 2 cores shared with other builds
# (load 15), where a warm start takes seconds.
start_seconds=${CLUSTER_START_SECONDS:-300}
deadline=$((SECONDS + start_seconds))
for port in $client; do
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        if ! kill -0 "$cluster_pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            echo "librdkafka_test.sh: the cluster did not come up in ${start_seconds}s" \
                "(CLUSTER_START_SECONDS; a cold plugin compile cache is the slow part); its log:" >&2
            tail -40 "$log" >&2
            exit 1
        fi
        sleep 0.5
    done
done
bootstrap=$(printf '127.0.0.1:%s,' $client)
bootstrap=${bootstrap%,}
# A broker decides a new topic's placement on its own metadata image, so a
# test's first CreateTopics with replication factor 3 needs every node to
# see all three brokers unfenced, not only itself: wait until each node's
# Metadata (which lists the unfenced brokers) names all three.
for port in $client; do
    until kcat -b "127.0.0.1:$port" -L -m 2 2>/dev/null | grep -q "^ 3 brokers:"; do
        if ! kill -0 "$cluster_pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            echo "librdkafka_test.sh: node on port $port does not list three brokers; the log:" >&2
            tail -40 "$log" >&2
            exit 1
        fi
        sleep 0.5
    done
done
echo "librdkafka_test.sh: cluster up on $bootstrap (log: $log)"

# --- run the tests -----------------------------------------------------------
conf=$data/test.conf
cat >"$conf" <<EOF
bootstrap.servers=$bootstrap
EOF
status=0
(
    cd "$tree/tests"
    # shellcheck disable=SC2086 # LIBRDKAFKA_TEST_ARGS is a list of flags
    # The runner links the shared libraries it was built with (as run-test.sh).
    LD_LIBRARY_PATH=$tree/src:$tree/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        RDKAFKA_TEST_CONF=$conf TESTS=$tests \
            TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-3.9.0} \
            ./test-runner ${LIBRDKAFKA_TEST_ARGS:-}
) || status=$?
if [ "$status" -ne 0 ]; then
    echo "librdkafka_test.sh: tests $tests failed (status $status)" >&2
fi
exit "$status"
