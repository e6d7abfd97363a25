"""Parses an OpenMetrics exposition (argv[1]) with the reference parser,
prometheus_client.openmetrics.parser, which refuses anything the 1.0 spec
does not allow; prints the family count and every sample's value, keyed
`name{label=value,...}`, as one JSON document."""

import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

families = 0
samples = {}
for family in text_string_to_metric_families(sys.argv[1]):
    families += 1
    for sample in family.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
        samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
print(json.dumps({"families": families, "samples": samples}))
