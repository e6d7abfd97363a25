"""What the test scripts share: a failed check ends the script with a
message, so the Rust test that runs it reports the script's stderr."""

import sys


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)
