# Gregor: `make run` starts a broker on 127.0.0.1:9092, `make test` runs every test.

CARGO      ?= cargo
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)
PLUGIN_DIR ?= build/plugins
DATA_DIR   ?= data
GREGOR_BIN := $(abspath $(TARGET_DIR)/release/gregor)

# Every handler module plus the default authorizer: each crate directory
# under plugins/ except the SDK (examples live one level down and are not
# loaded by default), so adding a plugin is adding its crate.
PLUGINS := $(filter-out sdk,$(patsubst plugins/%/Cargo.toml,%,$(wildcard plugins/*/Cargo.toml)))
PLUGIN_WASM := $(addprefix $(TARGET_DIR)/wasm32-wasip2/plugin/,$(addsuffix .wasm,$(PLUGINS)))
# Example modules: not loaded by default (drop one into the plugin dir to try it).
EXAMPLES := topic_summary chaos
# Least privilege: a module that writes ACLs and records, loaded only when granted.
EXAMPLES += provision_reader
# Security: the Rust example authorizer (the Python and JavaScript ones: `authorizers`).
EXAMPLES += authorizer_prefix
# Rollouts: a deliberately broken new version of Produce (canary, shadow).
EXAMPLES += produce_unready
# Interceptors: a Produce JSON validator, a tenant isolation filter, and
# one that changes nothing (the cost of an interceptor, bench-interceptors).
EXAMPLES += json_validator tenant_filter passthrough
EXAMPLE_DIR ?= build/examples
EXAMPLE_WASM := $(addprefix $(TARGET_DIR)/wasm32-wasip2/plugin/,$(addsuffix .wasm,$(EXAMPLES)))

export GREGOR_BIN
export GREGOR_PLUGIN_DIR := $(abspath $(PLUGIN_DIR))
export GREGOR_EXAMPLE_DIR := $(abspath $(EXAMPLE_DIR))

.PHONY: all build host plugins authorizers wasm-target test-deps run cluster test unit-test integration-test lint fmt bench bench-cluster bench-rps bench-scale bench-interceptors
.PHONY: librdkafka-test
.PHONY: fuzz

all: build

build: host plugins authorizers

wasm-target:
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

host:
	$(CARGO) build --release -p gregor -p topic-summary-client

plugins: wasm-target
	$(CARGO) build --profile plugin --target wasm32-wasip2 $(addprefix -p ,$(PLUGINS) $(EXAMPLES))
	mkdir -p $(PLUGIN_DIR) $(EXAMPLE_DIR)
	cp $(PLUGIN_WASM) $(PLUGIN_DIR)/
	cp $(EXAMPLE_WASM) $(EXAMPLE_DIR)/

# The example authorizer in Python (componentize-py) and JavaScript
# (componentize-js), the same policy as authorizer_prefix; rebuilt only
# when their source or the WIT changes (each takes tens of seconds).
WIT_FILES := $(wildcard wit/*.wit)
AUTHORIZER_PY := $(EXAMPLE_DIR)/authorizer_prefix_py.wasm
AUTHORIZER_JS := $(EXAMPLE_DIR)/authorizer_prefix_js.wasm
JS_AUTHORIZER_DIR := plugins/examples/authorizer_prefix_js

authorizers: $(AUTHORIZER_PY) $(AUTHORIZER_JS)

$(AUTHORIZER_PY): plugins/examples/authorizer_prefix_py/app.py $(WIT_FILES)
	@command -v componentize-py >/dev/null || bash .ci/deps.sh
	mkdir -p $(EXAMPLE_DIR)
	cd plugins/examples/authorizer_prefix_py && componentize-py -d ../../../wit -w kafka-authorizer componentize app -o $(abspath $@).tmp
	mv $@.tmp $@

$(AUTHORIZER_JS): $(JS_AUTHORIZER_DIR)/authorizer.js $(JS_AUTHORIZER_DIR)/build.mjs $(JS_AUTHORIZER_DIR)/package.json $(WIT_FILES)
	@test -d $(JS_AUTHORIZER_DIR)/node_modules/@bytecodealliance/componentize-js || bash .ci/deps.sh
	mkdir -p $(EXAMPLE_DIR)
	node $(JS_AUTHORIZER_DIR)/build.mjs $(abspath $@)

run: build
	$(GREGOR_BIN) serve --set listeners=PLAINTEXT://127.0.0.1:9092 --set log.dirs=$(DATA_DIR) --set plugin.dir=$(PLUGIN_DIR)

# Three combined-mode nodes on 127.0.0.1 (clients: 9092, 9093, 9094), data
# under $(DATA_DIR)/cluster/<node.id>, the same plugins as `run`; in the
# foreground, each node's output prefixed; Ctrl-C stops all three.
cluster: build
	CLUSTER_DATA=$(DATA_DIR)/cluster scripts/cluster.sh

# librdkafka's own regression tests (default 0103, transactions; others:
# LIBRDKAFKA_TESTS=0098,0129) against a 3-node cluster on free ports; the
# test runner is built once under $(TARGET_DIR)/librdkafka-tests. Never
# part of `make test` (the first build takes minutes).
LIBRDKAFKA_TESTS ?= 0103
librdkafka-test: build
	CARGO_TARGET_DIR=$(abspath $(TARGET_DIR)) scripts/librdkafka_test.sh $(LIBRDKAFKA_TESTS)

# Client tools the integration tests drive (kcat, librdkafka's build deps).
test-deps:
	@command -v kcat >/dev/null && command -v cmake >/dev/null || bash .ci/deps.sh

test: test-deps build unit-test integration-test

unit-test:
	$(CARGO) test --release --no-fail-fast -p gregor -p gregor-sdk $(addprefix -p ,$(PLUGINS) $(EXAMPLES))

# The integration tests with cargo-nextest: each test in its own process,
# TEST_JOBS at a time (they mostly wait on brokers, elections and timeouts,
# so more than the 2 cores); a hung test is ended after 5 minutes and a
# failed one run once more, reported FLAKY if it then passes
# (.config/nextest.toml). Plain `cargo test` where nextest is missing.
TEST_JOBS ?= 4
integration-test:
	@if command -v cargo-nextest >/dev/null; then \
	  echo "$(CARGO) nextest run --release -p gregor-tests -j $(TEST_JOBS)"; \
	  $(CARGO) nextest run --release -p gregor-tests -j $(TEST_JOBS); \
	else \
	  echo "cargo-nextest not found: $(CARGO) test (one test binary at a time)"; \
	  $(CARGO) test --release --no-fail-fast -p gregor-tests; \
	fi

# The host's top-level modules form no import cycle (.ci/import_cycles.py).
lint:
	python3 .ci/import_cycles.py --with-tests
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release -p gregor -p gregor-tests -p gregor-bench -- -D warnings
	$(CARGO) clippy --profile plugin --target wasm32-wasip2 -p gregor-sdk $(addprefix -p ,$(PLUGINS)) -- -D warnings

fmt:
	$(CARGO) fmt --all

# Benchmarks with real clients against a fresh broker, then side by side
# with the peer broker and the native floor; never part of `make test`.
# BENCH_QUICK=1: every scenario once, briefly (a check, not figures);
# BENCH_ONLY=suite|peer: one of the two parts.
bench: build
	$(CARGO) build --release -p gregor-bench
	python3 bench/run.py $(if $(BENCH_QUICK),--quick) $(if $(BENCH_ONLY),--only $(BENCH_ONLY))

# Requests per second of small requests (ApiVersions, Metadata, 1-record
# Produce) over 1, 10 and 100 connections against a fresh broker; never part
# of `make test`. Before/after, back to back under the same load:
# RPS_ARGS="--gregor-bin OLD --gregor-bin $(GREGOR_BIN) --rounds 3".
bench-rps: build
	$(CARGO) build --release -p gregor-bench --bin rps
	mkdir -p bench/results
	$(TARGET_DIR)/release/rps $(or $(RPS_ARGS),--gregor-bin $(GREGOR_BIN)) --json bench/results/rps.json

# The cost of one interceptor per request: Produce with none, with the
# pass-through example and with the JSON validator (rps requests/s and
# CPU per request, librdkafka records/s and CPU per GiB, the hooks inside
# the host), 3 alternating rounds, about 10 minutes (bench/interceptors.py);
# never part of `make test`. INTERCEPTOR_BENCH_ARGS="--parts rps" etc.
bench-interceptors: build
	$(CARGO) build --release -p gregor-bench --bin gregor-bench --bin rps
	python3 bench/interceptors.py --gregor-bin $(GREGOR_BIN) --bench $(abspath $(TARGET_DIR)/release/gregor-bench) --rps $(abspath $(TARGET_DIR)/release/rps) $(INTERCEPTOR_BENCH_ARGS)

# How cost grows: throughput, memory and descriptors at 1 to 10,000
# partitions, Metadata and start-up with 10,000 topics, memory per idle
# connection (bench/scale.py); never part of `make test`.
bench-scale: build
	python3 bench/scale.py

# Cluster figures on a local 3-node cluster (metadata propagation and
# controller failover; acks=all throughput at RF 3 vs RF 1 and leader
# failover; OffsetCommit on an RF 3 vs RF 1 __consumer_offsets and
# coordinator failover), about 10 minutes; never part of `make test`.
# BENCH_CLUSTER_PARTS=metadata,replication,offsets picks parts (see
# bench/cluster.py for the other BENCH_CLUSTER_* knobs).
bench-cluster: build
	$(CARGO) build --release -p gregor-bench --bin gregor-bench
	GREGOR_BENCH=$(abspath $(TARGET_DIR)/release/gregor-bench) python3 bench/cluster.py

# Longer fuzzing on demand; never part of `make test` (which runs the short,
# seeded versions as unit tests). The SDK's bounded decode of every request
# type with cargo-fuzz (libFuzzer, coverage-guided; nightly flags through
# RUSTC_BOOTSTRAP on the stable toolchain), FUZZ_SECONDS long; then the
# host's parsers (framing, header, record batches, decompression) as
# seeded runs of FUZZ_ITERATIONS inputs each (the host is a binary crate,
# so a libFuzzer target would have nothing to link).
FUZZ_SECONDS    ?= 120
FUZZ_ITERATIONS ?= 1000000
fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	cd plugins/sdk/fuzz && RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run decode -- -max_total_time=$(FUZZ_SECONDS)
	GREGOR_FUZZ_ITERATIONS=$(FUZZ_ITERATIONS) $(CARGO) test --release -p gregor fuzz_ -- --nocapture
