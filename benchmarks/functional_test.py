"""The whole functional_test stage on this machine: built-in catalog, demo model,
10 seeds, 5 checkpoint trials, sparse (the CI defaults), timed per group.

Per-group wall times come from the GitLab section markers in the stage log
(``section_start:<epoch>`` / ``section_end:<epoch>``, 1 s resolution).
Run: python benchmarks/functional_test.py [--seeds N] [--workers N] [extra stage options]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gatekeeper.core import proc  # noqa: E402 - after the path setup above

TARGET_S = 300.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    args, extra = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="gk-bench-ft-") as tmp:
        argv = [sys.executable, "-m", "gatekeeper", "stage", "functional_test", "--device", "cpu", "--out", tmp]
        argv += ["--seeds", str(args.seeds), "--workers", str(args.workers), *extra]
        start = time.monotonic()
        result = proc.run(argv, timeout=1800, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        wall = time.monotonic() - start
        if result.returncode not in (0, 1):
            print(result.stderr[-3000:], file=sys.stderr)
            return 1
        log = (Path(tmp) / "functional_test.log").read_text(errors="replace")
        doc = json.loads((Path(tmp) / "functional_test.json").read_text())
    starts = {m[1]: int(m[0]) for m in re.findall(r"section_start:(\d+):functional_test_(\w+)", log)}
    ends = {m[1]: int(m[0]) for m in re.findall(r"section_end:(\d+):functional_test_(\w+)", log)}
    counts: dict[str, int] = {}
    for c in doc["checks"]:
        counts[c.get("group") or "-"] = counts.get(c.get("group") or "-", 0) + 1
    print(f"functional_test, {args.seeds} seeds, {args.workers} workers, {os.cpu_count()} cores")
    print("| group | checks | wall time (s) |")
    print("| --- | ---: | ---: |")
    for group, began in starts.items():
        print(f"| {group} | {counts.get(group, 0)} | {ends.get(group, began) - began} |")
    print(f"| **whole stage** (process start to exit) | {len(doc['checks'])} | **{wall:.1f}** |")
    print(f"stage status {doc['status']}; target < {TARGET_S:.0f} s: {'met' if wall < TARGET_S else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
