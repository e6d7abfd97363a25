"""Side by side with a peer broker, and the cost per GiB against a native floor.

`bench/run.py` calls `compare`: each round starts Gregor, the peer (Tansu
0.6.0 with its `memory://` engine) and the native floor (`gregor-floor`)
one after the other on free loopback ports, with fresh data, and drives
Gregor and the peer with the same client (`gregor-bench`: librdkafka from
the `rdkafka` crate, the settings of `bench/src/{produce,consume,e2e}.rs`)
and the same records. The first broker of a round alternates (Gregor first
in even rounds, the peer in odd ones) so that drift in the machine's load
does not favour one of them. Figures are medians over the rounds.

Cost: the broker's CPU seconds (user + system of its process, from
/proc/<pid>/stat, before and after each client run) per GiB of record
payload moved. The floor receives the same number of payload bytes over
loopback TCP and appends them to a file, and sends that file back for
consume; its cost is measured the same way.

A scenario that fails (client error, timeout, broker exit) is recorded
with its reason, never dropped; its ratio is null.
"""

import json
import os
import shutil
import signal
import subprocess
import time

PEER_BIN = os.environ.get("BENCH_PEER_BIN", "/work/shared/peers/tansu/bin/tansu")
PEER_NAME = "Tansu 0.6.0 (memory engine)"
# Variables the peer would read instead of its flags.
PEER_ENV_DROP = ("STORAGE_ENGINE", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "CLUSTER_ID",
                 "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
GIB = float(1 << 30)


def produce_scenarios():
    return [("produce", size, acks, partitions)
            for size in (100, 1024) for acks in ("1", "all") for partitions in (1, 8)]


def produce_order(ctx, round_no):
    """The produce scenarios rotated by round, so each runs early in one
    round and late in another: on this project's machines writing into
    memory freed a moment ago costs several times more than into memory in
    use (BENCHMARKS.md, "Why produce costs move"), and with a fixed order
    the same scenarios (acks=all, after acks=1) paid for it every round."""
    scenarios = produce_scenarios()
    shift = len(scenarios) * round_no // max(ctx["rounds"], 1)
    return scenarios[shift:] + scenarios[:shift]


def consume_scenarios():
    return [("consume", size, None, partitions) for size in (100, 1024) for partitions in (1, 8)]


def name(kind, size, acks, partitions):
    label = "1 KiB" if size == 1024 else f"{size} B"
    if kind == "produce":
        return f"produce {label} acks={acks} p{partitions}"
    return f"consume {label} p{partitions}"


def records_for(ctx, size):
    """Records of a run: 4x as many of 100 B as of 1 KiB, so that a run moves
    enough bytes for the CPU clock's 10 ms ticks to resolve its cost."""
    return ctx["records"] * (4 if size < 1024 else 1)


def topic(size, acks, partitions, round_no):
    return f"side-{size}b-acks{acks}-p{partitions}-r{round_no}"


def cpu_seconds(pid):
    """User + system CPU of a process (its exited threads included)."""
    with open(f"/proc/{pid}/stat") as stat:
        # The command name may hold spaces: fields count from after ')'.
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


class Broker:
    """One broker process of a round: Gregor, the peer or the floor."""

    def __init__(self, label, argv, env, port, log_path):
        self.label = label
        self.port = port
        self.log_path = log_path
        self.log = open(log_path, "a")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log, env=env)

    def alive(self):
        return self.proc.poll() is None

    def exited(self, when):
        """Why it is gone: the exit status and the last line it logged."""
        self.log.flush()
        with open(self.log_path, errors="replace") as log:
            tail = last_line(log.read())
        return f"{self.label} exited {when} (exit {self.proc.returncode}: {tail})"

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def measured(broker, argv, timeout, payload_bytes):
    """Runs one client command against `broker`; its JSON line, the broker's
    CPU per GiB of payload, or the reason it failed."""
    if not broker.alive():
        return {"failed": broker.exited("before the run")}
    before = cpu_seconds(broker.proc.pid)
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"failed": f"no result within {timeout} s"}
    if not broker.alive():
        return {"failed": broker.exited("during the run")}
    after = cpu_seconds(broker.proc.pid)
    if run.returncode != 0:
        return {"failed": last_line(run.stderr or run.stdout)}
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    if payload_bytes:
        figures["broker_cpu_s"] = round(after - before, 3)
        figures["cpu_s_per_gib"] = round((after - before) / (payload_bytes / GIB), 3)
    return figures


def kafka_round(ctx, broker, round_no):
    """Every scenario against one running Kafka-compatible broker."""
    bench, bootstrap = ctx["bench"], f"127.0.0.1:{broker.port}"
    timeout = ctx["timeout"]
    # Warm-up outside the measurement (compiles, first connections, topic
    # creation paths): the same small run for both brokers.
    warm = f"side-warmup-r{round_no}"
    measured(broker, [bench, "produce", "--bootstrap", bootstrap, "--records", "2000", "--size", "1024",
                      "--topic", warm], timeout, 0)
    measured(broker, [bench, "consume", "--bootstrap", bootstrap, "--records", "2000", "--topic", warm],
             timeout, 0)
    out = {}
    for kind, size, acks, partitions in produce_order(ctx, round_no):
        records = records_for(ctx, size)
        out[name(kind, size, acks, partitions)] = measured(
            broker, [bench, "produce", "--bootstrap", bootstrap, "--records", str(records),
                     "--size", str(size), "--acks", acks, "--partitions", str(partitions),
                     "--topic", topic(size, acks, partitions, round_no)],
            timeout, records * size)
    for kind, size, _, partitions in consume_scenarios():
        source = name("produce", size, "1", partitions)
        if "failed" in out[source]:
            out[name(kind, size, None, partitions)] = {"failed": f"nothing to read ({source} failed)"}
            continue
        records = records_for(ctx, size)
        out[name(kind, size, None, partitions)] = measured(
            broker, [bench, "consume", "--bootstrap", bootstrap, "--records", str(records),
                     "--topic", topic(size, "1", partitions, round_no)],
            timeout, records * size)
    out["e2e"] = measured(
        broker, [bench, "e2e", "--bootstrap", bootstrap, "--rate", str(ctx["rate"]),
                 "--seconds", str(ctx["e2e_seconds"]), "--size", "1024"],
        timeout + ctx["e2e_seconds"], 0)
    return out


def floor_round(ctx, port, work):
    """The native floor: the 1 KiB scenarios' payload in and back out."""
    data = os.path.join(work, "floor.data")
    if os.path.exists(data):
        os.remove(data)
    floor = Broker("the floor", [ctx["floor"], "serve", "--port", str(port), "--file", data],
                   dict(os.environ), port, os.path.join(work, "floor.log"))
    try:
        try:
            ctx["wait_port"](port)
        except SystemExit as error:
            return {d: {"failed": f"did not start: {error}"} for d in ("produce", "consume")}
        payload = ctx["records"] * 1024
        produce = measured(floor, [ctx["floor"], "produce", "--port", str(port), "--bytes", str(payload)],
                           ctx["timeout"], payload)
        consume = measured(floor, [ctx["floor"], "consume", "--port", str(port)], ctx["timeout"], payload)
        return {"produce": produce, "consume": consume}
    finally:
        floor.stop()


def start_gregor(ctx, work, port):
    data = os.path.join(work, "gregor-data")
    shutil.rmtree(data, ignore_errors=True)
    admin = ctx["free_port"]()
    return Broker("Gregor", [ctx["gregor"], "serve",
                               "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                               "--set", f"log.dirs={data}",
                               "--set", f"plugin.dir={ctx['plugin_dir']}",
                               "--set", f"admin.listener=127.0.0.1:{admin}"],
                    dict(os.environ, GREGOR_CACHE_DIR=ctx["cache"]), port,
                    os.path.join(work, "gregor.log"))


def start_peer(ctx, work, port):
    env = {k: v for k, v in os.environ.items() if k not in PEER_ENV_DROP}
    url = f"tcp://127.0.0.1:{port}"
    return Broker("the peer", [PEER_BIN, "broker", "--listener-url", url, "--advertised-listener-url", url,
                               "--storage-engine", "memory://tansu/"],
                  env, port, os.path.join(work, "peer.log"))


def one_broker(ctx, work, which, round_no):
    port = ctx["free_port"]()
    try:
        broker = start_gregor(ctx, work, port) if which == "gregor" else start_peer(ctx, work, port)
    except OSError as error:
        return {s: {"failed": f"did not start: {error}"} for s in scenario_names()}
    try:
        ctx["wait_port"](port)
        return kafka_round(ctx, broker, round_no)
    except SystemExit as error:
        return {s: {"failed": f"did not start: {error}"} for s in scenario_names()}
    finally:
        broker.stop()


def scenario_names():
    return [name(*s) for s in produce_scenarios() + consume_scenarios()] + ["e2e"]


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def summarize(runs, keys):
    """Medians of `keys` over the rounds that succeeded, or the failure."""
    good = [r for r in runs if "failed" not in r]
    failures = [r["failed"] for r in runs if "failed" in r]
    if not good:
        return {"failed": failures[0], "failed_rounds": len(failures)}
    out = {k: round(median([r[k] for r in good]), 3) for k in keys if all(k in r for r in good)}
    if failures:
        out["failed_rounds"] = len(failures)
        out["failure"] = failures[0]
    return out


def ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def compare(ctx):
    """All rounds; returns the section for latest.json and its ratios."""
    work = ctx["work"]
    rounds = {"gregor": [], "peer": [], "floor": []}
    peer_missing = None if os.access(PEER_BIN, os.X_OK) else f"{PEER_BIN} is missing"
    load_before = os.getloadavg()
    for round_no in range(ctx["rounds"]):
        order = ["gregor", "peer"] if round_no % 2 == 0 else ["peer", "gregor"]
        for which in order:
            if which == "peer" and peer_missing:
                rounds["peer"].append({s: {"failed": peer_missing} for s in scenario_names()})
                continue
            rounds[which].append(one_broker(ctx, work, which, round_no))
        rounds["floor"].append(floor_round(ctx, ctx["free_port"](), work))
    load_after = os.getloadavg()

    throughput = ("mb_per_sec", "records_per_sec", "cpu_s_per_gib")
    latency_keys = ("p50", "p99", "p99_9")
    scenarios, vs_peer, vs_floor = {}, {}, {}
    floor = {d: summarize([r[d] for r in rounds["floor"]], ("mb_per_sec", "cpu_s_per_gib"))
             for d in ("produce", "consume")}
    for scenario in scenario_names():
        row = {}
        for which in ("gregor", "peer"):
            runs = [r[scenario] for r in rounds[which]]
            if scenario == "e2e":
                runs = [dict(r["latency_ms"], records=r["records"]) if "failed" not in r else r for r in runs]
                row[which] = summarize(runs, latency_keys)
            else:
                row[which] = summarize(runs, throughput)
        g, p = row["gregor"], row["peer"]
        if scenario == "e2e":
            vs_peer["e2e p50 ms"] = ratio(g.get("p50"), p.get("p50"))
            vs_peer["e2e p99 ms"] = ratio(g.get("p99"), p.get("p99"))
        else:
            vs_peer[scenario] = ratio(g.get("mb_per_sec"), p.get("mb_per_sec"))
            vs_peer[scenario + " cpu-s/GiB"] = ratio(g.get("cpu_s_per_gib"), p.get("cpu_s_per_gib"))
            base = floor[scenario.split()[0]].get("cpu_s_per_gib")
            row["gregor_vs_floor"] = vs_floor[scenario] = ratio(g.get("cpu_s_per_gib"), base)
            row["peer_vs_floor"] = ratio(p.get("cpu_s_per_gib"), base)
        scenarios[scenario] = row
    section = {
        "peer": PEER_NAME,
        "rounds": ctx["rounds"],
        "records_per_run": ctx["records"],
        "e2e": {"rate": ctx["rate"], "seconds": ctx["e2e_seconds"], "size": 1024},
        "quick": ctx["quick"],
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "scenarios": scenarios,
        "floor": floor,
        "raw_rounds": rounds,
    }
    return section, vs_peer, vs_floor


def cell(figures, unit_key="mb_per_sec"):
    if "failed" in figures:
        return f"failed: {figures['failed']}"
    text = f"{figures[unit_key]:.1f} MB/s, {figures['cpu_s_per_gib']:.2f} cpu-s/GiB"
    if figures.get("failed_rounds"):
        text += f" ({figures['failed_rounds']} round(s) failed: {figures['failure']})"
    return text


def times(value, suffix="×"):
    return f"{value:.3g}{suffix}" if value is not None else "n/a"


def print_tables(section):
    s = section
    print(f"\n## Side by side with {s['peer']} ({s['rounds']} alternating round(s), "
          f"median; {s['records_per_run']} records of 1 KiB, 4x as many of 100 B per run)\n")
    print(f"Load average before/after: {s['load_average_before']} / {s['load_average_after']}\n")
    print("| scenario | Gregor | peer | Gregor / peer speed | Gregor / peer cost | Gregor / floor cost | peer / floor cost |")
    print("|---|---|---|---|---|---|---|")
    for scenario, row in s["scenarios"].items():
        g, p = row["gregor"], row["peer"]
        if scenario == "e2e":
            continue
        speed = ratio(g.get("mb_per_sec"), p.get("mb_per_sec"))
        cost = ratio(g.get("cpu_s_per_gib"), p.get("cpu_s_per_gib"))
        print(f"| {scenario} | {cell(g)} | {cell(p)} | {times(speed)} | {times(cost)} | "
              f"{times(row['gregor_vs_floor'])} | {times(row['peer_vs_floor'])} |")
    e = s["scenarios"]["e2e"]
    print(f"\nEnd-to-end latency, {s['e2e']['rate']} records/s of 1 KiB for {s['e2e']['seconds']} s "
          "(p50 / p99 ms; lower is better):\n")
    print("| | Gregor | peer | Gregor / peer |")
    print("|---|---|---|---|")
    for key in ("p50", "p99"):
        g, p = e["gregor"], e["peer"]
        gv = f"{g[key]:.2f}" if key in g else f"failed: {g.get('failed')}"
        pv = f"{p[key]:.2f}" if key in p else f"failed: {p.get('failed')}"
        print(f"| {key} | {gv} | {pv} | {times(ratio(g.get(key), p.get(key)))} |")
    print("\nNative floor (loopback TCP into a file, and the file back out, 256 KiB reads/writes):\n")
    print("| direction | MB/s | cpu-s/GiB |")
    print("|---|---|---|")
    for direction, f in s["floor"].items():
        if "failed" in f:
            print(f"| {direction} | failed: {f['failed']} | |")
        else:
            print(f"| {direction} | {f['mb_per_sec']:.1f} | {f['cpu_s_per_gib']:.3f} |")
