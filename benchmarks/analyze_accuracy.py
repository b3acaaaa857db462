"""Per-category accuracy of `gatekeeper analyze` on the labelled real logs in tests/fixtures/logs.

    python benchmarks/analyze_accuracy.py

Prints the markdown table used in docs/failure_analysis.md and benchmarks/README.md.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gatekeeper.analyze import classify_logs  # noqa: E402
from gatekeeper.analyze.rules import CATEGORIES, load_rules  # noqa: E402

LOGS = ROOT / "tests" / "fixtures" / "logs"


def main() -> None:
    rules = load_rules()
    right: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    wrong: list[str] = []
    for line in (LOGS / "index.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        got = classify_logs([LOGS / entry["file"]], rules=rules).category
        total[entry["category"]] += 1
        right[entry["category"]] += got == entry["category"]
        if got != entry["category"]:
            wrong.append(f"{entry['file']}: labelled {entry['category']}, classified {got}")
    print("| category | logs | correct | accuracy |")
    print("| --- | ---: | ---: | ---: |")
    for cat in CATEGORIES:
        if total[cat]:
            print(f"| {cat} | {total[cat]} | {right[cat]} | {right[cat] / total[cat]:.0%} |")
        else:
            print(f"| {cat} | 0 | – | no labelled logs (covered by synthetic tests) |")
    n, ok = sum(total.values()), sum(right.values())
    print(f"| **all** | {n} | {ok} | {ok / n:.0%} |")
    for w in wrong:
        print(f"misclassified: {w}")


if __name__ == "__main__":
    main()
