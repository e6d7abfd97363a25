"""Parses an OpenMetrics exposition (the file argv[1] names; a scrape is
too long for one argument) with the reference parser,
prometheus_client.openmetrics.parser, which refuses anything the 1.0 spec
does not allow; prints the family count and every sample's value, keyed
`name{label=value,...}`, as one JSON document."""

import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

families = 0
samples = {}
for family in text_string_to_metric_families(open(sys.argv[1], encoding="utf-8").read()):
    families += 1
    for sample in family.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
        samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
print(json.dumps({"families": families, "samples": samples}))
