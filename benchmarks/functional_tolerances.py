"""Headroom of the tolerance table on a correct stack: for every op kind and dtype, the
largest relative error any catalog case reaches over N seeds on this CPU, against the
tolerance (stages/functional/tolerances.py). A ratio well below 1 means correct math
cannot fail the catalog by chance.

Run: python benchmarks/functional_tolerances.py [--seeds 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stages.functional.catalog import all_cases
from stages.functional.runner import run_case
from stages.functional.tolerances import DTYPES, tolerance


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    start = time.monotonic()
    worst: dict[tuple[str, str], tuple[float, str]] = {}
    failed = []
    for name, case in all_cases().items():
        result = run_case(name, "cpu", DTYPES, range(args.seeds))
        if result["status"] != "passed":
            failed.append(f"{name}: {result['message'][:200]}")
        for dtype, errs in result["details"]["errors"].items():
            key = (case.kind, dtype)
            if max(errs) >= worst.get(key, (-1.0, ""))[0]:
                worst[key] = (max(errs), name)
    print(f"{len(all_cases())} cases x {args.seeds} seeds in {time.monotonic() - start:.0f} s; failures: {len(failed)}")
    for line in failed:
        print("  FAILED", line)
    print("| kind | dtype | largest error | tolerance | ratio | case |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for (kind, dtype), (err, name) in sorted(worst.items()):
        tol = tolerance(kind, dtype)
        print(f"| {kind} | {dtype} | {err:.2e} | {tol:.0e} | {err / tol:.2f} | {name} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
