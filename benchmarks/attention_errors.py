"""Headroom of the attention tolerances on a correct stack: for every attention case and
dtype, the largest forward and gradient relative error over N seeds on this CPU, against
the limits in stages/functional/attention.py (TOLERANCE), and the time per case.

Run: python benchmarks/attention_errors.py [--seeds 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stages.functional.attention import SHAPES, TOLERANCE, cases, run_attention_case

DTYPES = ("float32", "float16", "bfloat16")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    start = time.monotonic()
    worst: dict[tuple[str, str, str], float] = {}
    for case in cases():
        t0 = time.monotonic()
        statuses = set()
        for seed in range(args.seeds):
            result = run_attention_case(case.name, "cpu", DTYPES, seed)
            statuses.add(result["status"])
            for dtype, errs in result["details"].get("errors", {}).items():
                parts = ("forward",) if SHAPES[case.shape].long else ("forward", "backward")
                for part, err in zip(parts * (len(errs) // len(parts)), errs, strict=True):
                    key = (case.name, dtype, part)
                    worst[key] = max(worst.get(key, 0.0), err)
            if result["status"] == "failed":
                print("  FAILED", case.name, seed, result["message"][:200])
        per = (time.monotonic() - t0) / args.seeds
        print(f"{case.name:40s} {'/'.join(sorted(statuses)):8s} {per:6.2f} s per run (3 dtypes)")
    print(f"{len(cases())} cases x {args.seeds} seeds in {time.monotonic() - start:.0f} s")
    print("| dtype | part | largest error | tolerance | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    for dtype in DTYPES:
        for i, part in enumerate(("forward", "backward")):
            errs = [e for (_, d, p), e in worst.items() if d == dtype and p == part]
            if errs:
                tol = TOLERANCE[dtype][i]
                print(f"| {dtype} | {part} | {max(errs):.3g} | {tol:g} | {max(errs) / tol:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
