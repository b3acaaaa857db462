"""Benchmark: the redactor (every file and line gatekeeper writes) on text built to make regexes backtrack.

Test names, messages and logs come from the code under test, and all of them pass through
``gatekeeper.core.redact.redact`` before they are written. Each shape below once made one of its
patterns backtrack (see benchmarks/README.md for the times before); this prints the time now.

    python benchmarks/redact_hostile.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gatekeeper.core.redact import redact

SHAPES = {
    '"a://b:" repeated': "a://b:" * 200_000,
    '"a." repeated': "a." * 500_000,
    '"x://" then "@-" repeated': "x://" + "@-" * 500_000,
    'a quote, then "password" repeated': '"' + "password" * 125_000,
    '"password": " then "\\a" repeated': '"password": "' + "\\a" * 500_000,
    # the secret-named pairs (redaction by structure): every name is checked by segment
    '"PASSWORD=x " repeated': "PASSWORD=x " * 90_000,
    "\"'token': '\" repeated": "'token': '" * 100_000,
    '"key=\\"" then "\\\\" repeated': 'key=\\"' + "\\\\" * 500_000,
    '"-" run then "token=x"': "-" * 1_000_000 + "token=x",
    # harmless names that hold a secret word: each is passed over, its value never taken
    '"passing: " repeated': "passing: " * 111_000,
    "'\"tokenizer\": ' repeated": '"tokenizer": ' * 77_000,
}


def main() -> None:
    print("| text | size | redact time |")
    print("| --- | ---: | ---: |")
    for name, text in SHAPES.items():
        start = time.perf_counter()
        redact(text, environ={})
        print(f"| {name} | {len(text) / 1e6:.1f} MB | {time.perf_counter() - start:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
