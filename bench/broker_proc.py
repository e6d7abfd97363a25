"""What the CPU-per-GiB scripts share: a free loopback port, waiting for a
broker to listen, and a process's CPU seconds (user + system) from /proc."""

import os
import socket
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"broker did not listen on {port}")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based); fields[0] is field 3.
    return (int(fields[11]) + int(fields[12])) / TICKS


def minor_faults(pid):
    """A process's minor page faults so far: a fresh page touched (a
    buffer the allocator had given back) counts one."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # minflt is field 10 (1-based).
    return int(fields[7])
