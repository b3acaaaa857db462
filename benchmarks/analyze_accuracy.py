"""Accuracy of `gatekeeper analyze` on the labelled real logs in tests/fixtures/logs, per frozen split,
and on the failure families planted for real on this CPU (tests/support/planted.py).

    python benchmarks/analyze_accuracy.py [--rules-only] [--errors] [--planted | --planted-only]

For each split (train, test; see gatekeeper/analyze/corpus.py) prints per-category recall, precision
and abstain rate (share of that category's logs answered `unknown`), the overall top-1 accuracy, the
precision of the non-`unknown` answers, and how many answers came from a rule and how many from the
learned model. --rules-only leaves the model out. --errors lists the misclassified logs of the
train split only: rules and the model are never tuned on the test split, so its files are not named.
--planted also plants each family of issue 28 (a wrong kernel, a model that does not import, a GPU
required on a CPU runner, a 30% slower model, a hang, a segfault) in a temporary model repository,
runs its stage and `gatekeeper evaluate`, and reports whether `gatekeeper analyze --artifacts` names
the family's category and its failing check (a few minutes); --planted-only skips the corpus.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gatekeeper.analyze import classify_logs  # noqa: E402
from gatekeeper.analyze.corpus import read_index, score  # noqa: E402
from gatekeeper.analyze.rules import CATEGORIES, load_rules  # noqa: E402

LOGS = ROOT / "tests" / "fixtures" / "logs"


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rules-only", action="store_true", help="without the learned second opinion")
    parser.add_argument("--errors", action="store_true", help="list misclassified train-split logs")
    parser.add_argument("--split", choices=["train", "test"], action="append", help="only this split (repeatable)")
    parser.add_argument("--planted", action="store_true", help="also the planted families (runs stages)")
    parser.add_argument("--planted-only", action="store_true", help="only the planted families")
    args = parser.parse_args(argv)
    if not args.planted_only:
        _corpus(args)
    if args.planted or args.planted_only:
        _planted()


def _planted() -> None:
    import json
    import tempfile

    from gatekeeper.core import proc
    from tests.support.planted import FAMILIES, gatekeeper_command, make_repo, plant

    print("\n### planted families (tests/support/planted.py, run for real on this CPU)\n")
    print("| family | what | expected | answered | failing check named | decided by | right |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    right = 0
    with tempfile.TemporaryDirectory(prefix="gk-planted-") as tmp:
        repo = make_repo(Path(tmp))
        for name, family in FAMILIES.items():
            planted = plant(name, repo)
            res = proc.run(
                [*gatekeeper_command(), "analyze", "--artifacts", str(planted.artifacts), "--format", "json"],
                timeout=300,
                cwd=repo,
            )
            doc = json.loads(res.stdout) if res.returncode == 0 else {}
            f = doc.get("failing_check") or {}
            named = (
                (f"{f.get('stage')}/{f.get('name')}" if f.get("source") == "check" else f"gate {f.get('name')}")
                if f
                else "—"
            )
            ok = doc.get("category") == family.category and named == family.failing
            right += ok
            print(
                f"| {name} | {family.what} | {family.category} | {doc.get('category', res.describe())} | `{named}` "
                f"| {doc.get('decided_by', '—')} | {'yes' if ok else 'NO'} |"
            )
    print(f"\n{right} of {len(FAMILIES)} planted families named with their category and failing check")


def _corpus(args: argparse.Namespace) -> None:
    rules = load_rules()
    entries = read_index(LOGS / "index.jsonl")
    kwargs = {"model": None} if args.rules_only else {}
    for split in args.split or ("train", "test"):
        pairs, deciders, wrong = [], Counter(), []
        for entry in (e for e in entries if e["split"] == split):
            d = classify_logs([LOGS / entry["file"]], rules=rules, **kwargs)
            pairs.append((entry["category"], d.category))
            deciders[getattr(d, "decided_by", "rule") if d.category != "unknown" else "abstain"] += 1
            if d.category != entry["category"]:
                wrong.append(f"{entry['file']}: labelled {entry['category']}, answered {d.category}")
        # categories no log is labelled with and no answer names (gatekeeper's own) have no row
        s = score(pairs, [c for c in CATEGORIES if c != "unknown" and any(c in pair for pair in pairs)])
        print(f"\n### {split} split ({s.total} logs)\n")
        print("| category | logs | correct | recall | precision | abstain |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for c in s.categories:
            print(
                f"| {c.category} | {c.logs} | {c.correct} | {_fmt(c.recall)} | {_fmt(c.precision)} "
                f"| {_fmt(c.abstain_rate)} |"
            )
        print(
            f"| **all** | {s.total} | {s.correct} | top-1 {s.accuracy:.2f} | non-unknown {_fmt(s.answered_precision)} "
            f"| {s.abstain_rate:.2f} |"
        )
        print(f"\nanswers: {dict(sorted(deciders.items()))}")
        if args.errors and split == "train":
            for w in wrong:
                print(f"misclassified: {w}")


if __name__ == "__main__":
    main()
