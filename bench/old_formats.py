#!/usr/bin/env python3
"""What the old message formats cost (not part of `make test`).

Starts a fresh broker and measures, over raw sockets so the client does
little beyond moving bytes:
- produce: the same 100-record request sent again and again with Produce
  v3 (one v2 batch, stored as sent) and with Produce v2 (a magic v1
  message set, up-converted to a v2 batch on append);
- fetch: the whole partition read with Fetch v4 (batches as stored) and
  with Fetch v3 (down-converted to magic v1 messages).
For each: MB/s of record bytes moved and the broker's CPU seconds per GiB
(utime + stime from /proc/<pid>/stat). Prints a Markdown table.

Environment: GREGOR_BIN, GREGOR_PLUGIN_DIR, OLD_FORMATS_REQUESTS (produce
requests per run, default 3000), OLD_FORMATS_VALUE (value bytes, 100).
"""

import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("GREGOR_BIN", os.path.join(ROOT, "target/release/gregor"))
PLUGINS = os.environ.get("GREGOR_PLUGIN_DIR", os.path.join(ROOT, "build/plugins"))
REQUESTS = int(os.environ.get("OLD_FORMATS_REQUESTS", "3000"))
VALUE = int(os.environ.get("OLD_FORMATS_VALUE", "100"))
RECORDS_PER_REQUEST = 100
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.correlation = 0

    def call(self, key, version, body):
        self.correlation += 1
        header = struct.pack(">hhih", key, version, self.correlation, 5) + b"bench"
        frame = header + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self.recv(4))[0]
        payload = self.recv(size)
        assert struct.unpack(">i", payload[:4])[0] == self.correlation
        return payload[4:]

    def recv(self, n):
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise SystemExit("broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


def string(s):
    return struct.pack(">h", len(s)) + s.encode()


def produce_body(version, topic, records):
    body = b""
    if version >= 3:
        body += struct.pack(">h", -1)  # no transactional id
    body += struct.pack(">hi", 1, 30000) + struct.pack(">i", 1) + string(topic)
    return body + struct.pack(">ii", 1, 0) + struct.pack(">i", len(records)) + records


def fetch_body(version, topic, offset):
    body = struct.pack(">iii", -1, 0, 1)
    if version >= 3:
        body += struct.pack(">i", 4 << 20)
    if version >= 4:
        body += b"\x00"
    body += struct.pack(">i", 1) + string(topic) + struct.pack(">ii", 1, 0)
    return body + struct.pack(">qi", offset, 1 << 20)


def v2_batch():
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(RECORDS_PER_REQUEST):
        b.append(i, now, b"key-%d" % i, b"v" * VALUE, [])
    return bytes(b.build())


def v1_set():
    b = LegacyRecordBatchBuilder(1, 0, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(RECORDS_PER_REQUEST):
        b.append(i, now, b"key-%d" % i, b"v" * VALUE)
    return bytes(b.build())


def produce_run(conn, pid, version, topic, records):
    body = produce_body(version, topic, records)
    cpu, began = cpu_seconds(pid), time.time()
    for _ in range(REQUESTS):
        answer = conn.call(0, version, body)
        error = struct.unpack(">h", answer[4 + 2 + len(topic) + 4 + 4:][:2])[0]
        assert error == 0, f"Produce v{version}: error {error}"
    return time.time() - began, cpu_seconds(pid) - cpu, len(records) * REQUESTS


def fetch_run(conn, pid, version, topic, end):
    offset, moved = 0, 0
    cpu, began = cpu_seconds(pid), time.time()
    while offset < end:
        answer = conn.call(1, version, fetch_body(version, topic, offset))
        at = 4 + 4 + 2 + len(topic) + 4 + 4  # throttle, topics, name, partitions, index
        error, _hw = struct.unpack(">hq", answer[at:at + 10])
        assert error == 0, f"Fetch v{version}: error {error}"
        at += 10
        if version >= 4:
            at += 8 + 4  # last stable offset, aborted transactions (null)
        size = struct.unpack(">i", answer[at:at + 4])[0]
        records = answer[at + 4:at + 4 + size]
        moved += size
        offset = next_offset(records, version >= 4)
    return time.time() - began, cpu_seconds(pid) - cpu, moved


def next_offset(records, batches):
    """The offset after the last whole batch (v2) or message (v0/v1)."""
    pos, last = 0, -1
    while pos + 12 <= len(records):
        base, length = struct.unpack(">qi", records[pos:pos + 12])
        if pos + 12 + length > len(records):
            break
        if batches:
            last = base + struct.unpack(">i", records[pos + 23:pos + 27])[0]
        else:
            last = base
        pos += 12 + length
    assert last >= 0, "no whole batch in a fetch answer"
    return last + 1


def row(name, run):
    seconds, cpu, moved = run
    gib = moved / (1 << 30)
    return f"| {name} | {moved / seconds / 1e6:.1f} | {cpu / gib:.1f} |"


def main():
    work = tempfile.mkdtemp(prefix="gregor-old-formats-")
    port = free_port()
    log = open(os.path.join(work, "broker.log"), "a")
    proc = subprocess.Popen(
        [BIN, "serve", "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--set", f"log.dirs={work}/data", "--set", f"plugin.dir={PLUGINS}"],
        stdout=log, stderr=log)
    try:
        deadline = time.time() + 60
        while True:
            try:
                conn = Conn(port)
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit("broker did not start")
                time.sleep(0.05)
        topic = "bench-old-formats"
        # Metadata v1 with auto-creation makes the topic; wait for it.
        for _ in range(100):
            conn.call(3, 1, struct.pack(">i", 1) + string(topic))
            if conn.call(0, 3, produce_body(3, topic, v2_batch()))[4 + 2 + len(topic) + 8:][:2] == b"\x00\x00":
                break
            time.sleep(0.1)
        lines = ["| Run | MB/s of records | broker CPU s per GiB |", "|---|---|---|"]
        modern = produce_run(conn, proc.pid, 3, topic, v2_batch())
        old = produce_run(conn, proc.pid, 2, topic, v1_set())
        lines.append(row("Produce v3 (v2 batch, stored as sent)", modern))
        lines.append(row("Produce v2 (magic v1 set, up-converted)", old))
        end = RECORDS_PER_REQUEST + 2 * REQUESTS * RECORDS_PER_REQUEST
        lines.append(row("Fetch v4 (v2 batches as stored)", fetch_run(conn, proc.pid, 4, topic, end)))
        lines.append(row("Fetch v3 (down-converted to magic v1)", fetch_run(conn, proc.pid, 3, topic, end)))
        lines.append(row("Fetch v4 again", fetch_run(conn, proc.pid, 4, topic, end)))
        lines.append(row("Fetch v3 again", fetch_run(conn, proc.pid, 3, topic, end)))
        print(f"{REQUESTS} requests of {RECORDS_PER_REQUEST} records of {VALUE} bytes per produce run; "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
        print("\n".join(lines))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
