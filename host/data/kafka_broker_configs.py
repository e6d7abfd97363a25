#!/usr/bin/env python3
"""Builds kafka_broker_configs.json, the catalog of Kafka's broker configs
that the host loads (`config_admin::catalog`), from Kafka's own
documentation rather than by hand.

Inputs:
- KAFKA_CONFIG_HTML: Kafka's generated broker config page, the one
  kafka.apache.org shows as "Broker Configs" (in the kafka-site repository,
  `40/generated/kafka_config.html` for Kafka 4.0). Each config there has
  its name, documentation, type, default, valid values, importance and
  update mode (read-only, per-broker, cluster-wide).
- SSL_CONFIGS_JAVA (optional): Kafka's
  `clients/src/main/java/org/apache/kafka/common/config/SslConfigs.java`,
  whose RECONFIGURABLE_CONFIGS are the security configs Kafka lets change
  only under a listener prefix (`listener.name.<listener>.<config>`); the
  page does not say which they are.

Usage: kafka_broker_configs.py KAFKA_CONFIG_HTML [SSL_CONFIGS_JAVA] > kafka_broker_configs.json

The output is a JSON array, one config a line, sorted by name: name, type
(Kafka's lower-case type name), default (null where Kafka has none), the
checks its valid values imply (min, max, one_of, case_insensitive,
non_empty), mode, listener_only, and the documentation as plain text.
"""

import html
import json
import re
import sys

ENTRY = re.compile(r'<h4><a id="([^"]+)"></a>.*?</h4>(.*?)<table><tbody>(.*?)</tbody></table>', re.S)
ROW = re.compile(r"<tr><th>([^<]+):</th><td>(.*?)</td></tr>", re.S)
RANGE = re.compile(r"^\[(-?\d+),\.\.\.(?:,(-?\d+))?\]$")
NUMERIC = {"int", "short", "long", "double"}
MODES = {"read-only", "per-broker", "cluster-wide"}


def plain(fragment):
    """HTML to one line of text."""
    text = re.sub(r"<br\s*/?>", " ", fragment)
    text = re.sub(r"<[^>]+>", "", text)
    return " ".join(html.unescape(text).split())


def default_of(kind, raw):
    """The page's default as a value: None for null or none (a required
    config), "" for an empty string, numbers without the page's
    "(30 seconds)" gloss."""
    raw = plain(raw)
    if raw in ("null", ""):
        return None
    if raw == '""':
        return ""
    if kind in NUMERIC:
        raw = re.sub(r"\s*\(.*\)$", "", raw)
    return raw


def checks(kind, raw):
    """What a value must satisfy, from the page's "Valid Values"."""
    valid = plain(raw)
    out = {}
    match = RANGE.match(valid)
    if match and kind in NUMERIC:
        out["min"] = int(match.group(1))
        if match.group(2) is not None:
            out["max"] = int(match.group(2))
        return out
    if valid.startswith("(case insensitive) "):
        out["case_insensitive"] = True
        valid = valid[len("(case insensitive) "):]
    if valid.startswith("[") and valid.endswith("]") and kind in {"string", "list"}:
        out["one_of"] = [item.strip() for item in valid[1:-1].split(",")]
    elif valid in {"non-empty string", "non-empty list"}:
        out["non_empty"] = True
    return out


def listener_only(path):
    """The names in SslConfigs.RECONFIGURABLE_CONFIGS."""
    if path is None:
        return set()
    source = open(path, encoding="utf-8").read()
    constants = dict(re.findall(r'static final String (\w+) = "([^"]+)";', source))
    body = re.search(r"RECONFIGURABLE_CONFIGS = Set\.of\((.*?)\);", source, re.S)
    if body is None:
        sys.exit("RECONFIGURABLE_CONFIGS not found in " + path)
    names = re.findall(r"SslConfigs\.(\w+)", body.group(1))
    return {constants[name] for name in names}


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    page = open(argv[1], encoding="utf-8").read()
    per_listener = listener_only(argv[2] if len(argv) == 3 else None)
    catalog = []
    for name, doc, table in ENTRY.findall(page):
        fields = {key: value for key, value in ROW.findall(table)}
        kind = plain(fields["Type"])
        mode = plain(fields["Update Mode"])
        if mode not in MODES:
            sys.exit(f"{name}: unknown update mode {mode!r}")
        entry = {"name": name, "type": kind, "default": default_of(kind, fields["Default"])}
        entry.update(checks(kind, fields["Valid Values"]))
        entry["mode"] = mode
        entry["listener_only"] = name in per_listener
        entry["doc"] = plain(doc)
        catalog.append(entry)
    if not catalog:
        sys.exit("no configs found in " + argv[1])
    catalog.sort(key=lambda entry: entry["name"])
    lines = [json.dumps(entry, ensure_ascii=False) for entry in catalog]
    sys.stdout.write("[\n" + ",\n".join(lines) + "\n]\n")


if __name__ == "__main__":
    main(sys.argv)
