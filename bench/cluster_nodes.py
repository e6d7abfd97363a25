"""A local 3-node cluster for the cluster benchmarks (bench/cluster.py and
its parts): started with scripts/cluster.sh on free loopback ports with an
empty data directory, so every part measures the cluster `make cluster`
runs. The benchmarks kill nodes with SIGKILL and start them again, which
cluster.sh does not do, so this module finds each node's process among
the script's children, keeps its command line, and relaunches a killed
node with the same arguments and data directory (as an operator
restarting the broker would). Stopping sends Ctrl-C to the script's
process group and SIGTERM to the relaunched nodes.
"""

import os
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import cluster as checks  # noqa: E402  (tests/python/cluster.py)
from broker_proc import cpu_seconds  # noqa: E402

NODES = 3


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def node_pid(script_pid, node_id):
    """The pid of node `node_id` among the script's children."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if ppid == script_pid and f"node.id={node_id}".encode() in args:
            return int(entry)
    raise SystemExit(f"node {node_id} not found among the children of {script_pid}")


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def alive(pid):
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Cluster:
    """scripts/cluster.sh with `args` passed to every node, in `work`."""

    def __init__(self, work, args=(), label="cluster"):
        self.work = work
        client, controller, quorum, admin = (free_ports(NODES) for _ in range(4))
        env = dict(os.environ,
                   CLUSTER_DATA=os.path.join(work, "data"),
                   CLUSTER_PORTS=" ".join(map(str, client)),
                   CLUSTER_CONTROLLER_PORTS=" ".join(map(str, controller)),
                   CLUSTER_QUORUM_PORTS=" ".join(map(str, quorum)),
                   CLUSTER_ADMIN_PORTS=" ".join(map(str, admin)),
                   CLUSTER_STOP_ON_EXIT="0")
        self.log = open(os.path.join(work, f"{label}.log"), "w")
        self.proc = subprocess.Popen([os.path.join(ROOT, "scripts", "cluster.sh"), *args],
                                     env=env, stdout=self.log, stderr=self.log,
                                     start_new_session=True, cwd=ROOT)
        self.brokers = [f"127.0.0.1:{p}" for p in client]
        self.bootstrap = ",".join(self.brokers)
        self.restarted = {}  # node id -> Popen of a relaunched node
        self.commands = {}  # node id -> its command line

        def formed():
            seen = [checks.raw_metadata(b) for b in self.brokers]
            return (all(m["brokers"] == [1, 2, 3] for m in seen)
                    and len({m["controller"] for m in seen}) == 1
                    and seen[0]["controller"] >= 1 and seen[0]["controller"])

        try:
            self.controller = checks.until(formed, 90)
            for node in range(1, NODES + 1):
                self.commands[node] = cmdline(node_pid(self.proc.pid, node))
        except BaseException:
            # A cluster that did not form is stopped, not left running.
            self.stop()
            raise

    def pid(self, node):
        if node in self.restarted:
            return self.restarted[node].pid
        return node_pid(self.proc.pid, node)

    def pids(self):
        return [self.pid(node) for node in range(1, NODES + 1)]

    def broker(self, node):
        return self.brokers[node - 1]

    def kill(self, node):
        """SIGKILL node `node`; returns the time (time.time()) of the kill."""
        pid = self.pid(node)
        killed_at = time.time()
        os.kill(pid, signal.SIGKILL)
        if node in self.restarted:
            self.restarted.pop(node).wait(timeout=10)
        deadline = time.time() + 10
        while alive(pid) and time.time() < deadline:
            time.sleep(0.001)
        return killed_at

    def restart(self, node):
        """Start a killed node again with its command line and data; waits
        until every broker lists all three nodes."""
        self.restarted[node] = subprocess.Popen(
            ["setpriv", "--pdeathsig", "TERM", "--", *self.commands[node]],
            stdout=self.log, stderr=self.log, cwd=ROOT)

        def back():
            return all(checks.raw_metadata(b)["brokers"] == [1, 2, 3] for b in self.brokers)

        checks.until(back, 90, pause=0.1)

    def cpu(self):
        """CPU seconds (user + system) the three nodes have used so far."""
        return sum(cpu_seconds(pid) for pid in self.pids())

    def idle_cpu(self, seconds=3.0):
        """CPU seconds per second the three nodes use with no client
        traffic (heartbeats, follower fetches): the background under every
        CPU figure of a run."""
        cpu0 = self.cpu()
        time.sleep(seconds)
        return round((self.cpu() - cpu0) / seconds, 3)

    def stop(self):
        for proc in self.restarted.values():
            proc.terminate()
        os.killpg(self.proc.pid, signal.SIGINT)
        self.proc.wait(timeout=60)
        for proc in self.restarted.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.log.close()
