#!/usr/bin/env bash
# Installs what Gregor's build and tests need on a fresh Debian bookworm
# machine (run as root). Idempotent: a second run changes nothing.
#
# - build-essential, pkg-config, python3: rdkafka-sys builds the bundled
#   librdkafka from source (its configure script, make, a C compiler; python3
#   generates the linker script). cmake for crates built with CMake (and
#   rdkafka's cmake-build feature).
# - zlib1g-dev: librdkafka's compression (rdkafka's default `libz` feature).
# - libssl-dev: for crates that link OpenSSL (TLS listeners, rdkafka's `ssl`
#   feature); librdkafka itself is built without SSL by default.
# - kcat: the kcat integration tests (tests/tests/kcat.rs).
# - prometheus: its promtool checks the broker's /metrics (tests/tests/metrics.rs).
# - chromium, chromium-driver: the web console's browser test drives
#   headless Chromium (through pip's selenium, below; tests/tests/console.rs).
# - nftables, iproute2: the fault test's links cut inside its own network
#   namespace (tests/tests/faults.rs).
# - rapidjson-dev: librdkafka's 0098 transactional-consumer test, built by
#   `make librdkafka-test` (without it the test runner skips 0098).
# - curl, ca-certificates, git: general tooling.
# - wasm32-wasip2: the target the handler plugins are built for.
set -euo pipefail

packages=(
    build-essential
    ca-certificates
    chromium
    chromium-driver
    cmake
    curl
    git
    iproute2
    kcat
    libssl-dev
    nftables
    pkg-config
    prometheus
    python3
    rapidjson-dev
    zlib1g-dev
)

missing=()
for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} > 0)); then
    echo "deps.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
else
    echo "deps.sh: Debian packages already installed"
fi

if ! command -v rustup >/dev/null 2>&1; then
    echo "deps.sh: rustup not found; the machine's Rust toolchain is expected" >&2
    exit 1
fi
if rustup target list --installed | grep -qx 'wasm32-wasip2'; then
    echo "deps.sh: wasm32-wasip2 already installed"
else
    rustup target add wasm32-wasip2
fi

# kafka-python: the second, independent client of the consumer-group tests
# (tests/python/group_flow.py, driven by tests/tests/groups.rs).
KAFKA_PYTHON=2.3.3
if python3 -c "import kafka, sys; sys.exit(kafka.__version__ != '$KAFKA_PYTHON')" 2>/dev/null; then
    echo "deps.sh: kafka-python $KAFKA_PYTHON already installed"
else
    python3 -m pip --version >/dev/null 2>&1 || apt-get install -y --no-install-recommends python3-pip
    python3 -m pip install --quiet "kafka-python==$KAFKA_PYTHON" \
        || python3 -m pip install --quiet --break-system-packages "kafka-python==$KAFKA_PYTHON"
fi

# confluent-kafka: librdkafka's AdminClient from Python, for the admin API
# tests (tests/python/admin_configs.py, driven by tests/tests/admin.rs).
CONFLUENT_KAFKA=2.16.1
if python3 -c "import confluent_kafka, sys; sys.exit(confluent_kafka.__version__ != '$CONFLUENT_KAFKA')" 2>/dev/null; then
    echo "deps.sh: confluent-kafka $CONFLUENT_KAFKA already installed"
else
    python3 -m pip --version >/dev/null 2>&1 || apt-get install -y --no-install-recommends python3-pip
    python3 -m pip install --quiet "confluent-kafka==$CONFLUENT_KAFKA"         || python3 -m pip install --quiet --break-system-packages "confluent-kafka==$CONFLUENT_KAFKA"
fi

# prometheus-client: the reference Python parser of OpenMetrics text, for
# the OpenMetrics scrape test (tests/tests/metrics.rs; promtool reads only
# the Prometheus text format).
PROMETHEUS_CLIENT=0.21.1
if python3 -c "import importlib.metadata as m, sys; sys.exit(m.version('prometheus-client') != '$PROMETHEUS_CLIENT')" 2>/dev/null; then
    echo "deps.sh: prometheus-client $PROMETHEUS_CLIENT already installed"
else
    python3 -m pip --version >/dev/null 2>&1 || apt-get install -y --no-install-recommends python3-pip
    python3 -m pip install --quiet "prometheus-client==$PROMETHEUS_CLIENT" \
        || python3 -m pip install --quiet --break-system-packages "prometheus-client==$PROMETHEUS_CLIENT"
fi

# selenium: drives headless Chromium for the web console's test
# (tests/python/console_browser.py, driven by tests/tests/console.rs).
SELENIUM=4.27.1
if python3 -c "import selenium, sys; sys.exit(selenium.__version__ != '$SELENIUM')" 2>/dev/null; then
    echo "deps.sh: selenium $SELENIUM already installed"
else
    python3 -m pip --version >/dev/null 2>&1 || apt-get install -y --no-install-recommends python3-pip
    python3 -m pip install --quiet "selenium==$SELENIUM" \
        || python3 -m pip install --quiet --break-system-packages "selenium==$SELENIUM"
fi

# The example authorizers in other languages (`make authorizers`):
# componentize-py for Python, and node with the componentize-js package
# (plugins/examples/authorizer_prefix_js/package-lock.json) for JavaScript.
COMPONENTIZE_PY=0.25.1
if componentize-py --version 2>/dev/null | grep -q "$COMPONENTIZE_PY"; then
    echo "deps.sh: componentize-py $COMPONENTIZE_PY already installed"
else
    python3 -m pip --version >/dev/null 2>&1 || apt-get install -y --no-install-recommends python3-pip
    python3 -m pip install --quiet "componentize-py==$COMPONENTIZE_PY" \
        || python3 -m pip install --quiet --break-system-packages "componentize-py==$COMPONENTIZE_PY"
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends nodejs npm
fi
js_dir="$(dirname "$0")/../plugins/examples/authorizer_prefix_js"
if [ -d "$js_dir/node_modules/@bytecodealliance/componentize-js" ]; then
    echo "deps.sh: componentize-js already installed"
else
    (cd "$js_dir" && npm ci --no-audit --no-fund)
fi

# cargo-nextest runs the integration tests side by side (make
# integration-test); this kind of machine ships it, else it is built once.
if command -v cargo-nextest >/dev/null 2>&1; then
    echo "deps.sh: $(cargo-nextest --version 2>/dev/null | head -1) already installed"
else
    cargo install --locked cargo-nextest
fi

kcat -V >/dev/null 2>&1 || { echo "deps.sh: kcat does not run" >&2; exit 1; }
echo "deps.sh: done"
