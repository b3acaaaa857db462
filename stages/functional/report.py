"""What the stage reports: the per-category table, the precision statistics, the
metrics gates read, and the markdown summary (``functional_test.md``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatekeeper.core.files import atomic_write

__all__ = ["Tally", "percentile", "write_markdown"]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation: the figure is one of the measured errors)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


@dataclass
class _Category:
    cases: int = 0
    passed: int = 0
    skipped: int = 0
    failing_ops: list[str] = field(default_factory=list)
    failing_cases: list[str] = field(default_factory=list)

    def rate(self) -> float | None:
        ran = self.cases - self.skipped
        return self.passed / ran if ran else None


@dataclass
class Tally:
    """Counts per category and the error samples per dtype, filled as checks are recorded."""

    categories: dict[str, _Category] = field(default_factory=dict)
    errors: dict[str, list[float]] = field(default_factory=dict)  # dtype -> one sample per case x seed

    def add(self, category: str, name: str, op: str, status: str, errors: dict[str, list[float]] | None = None) -> None:
        cat = self.categories.setdefault(category, _Category())
        cat.cases += 1
        if status == "passed":
            cat.passed += 1
        elif status == "skipped":
            cat.skipped += 1
        else:
            cat.failing_cases.append(name)
            if op not in cat.failing_ops:
                cat.failing_ops.append(op)
        for dtype, errs in (errors or {}).items():
            self.errors.setdefault(dtype, []).extend(errs)

    def overall(self) -> float | None:
        ran = sum(c.cases - c.skipped for c in self.categories.values())
        return sum(c.passed for c in self.categories.values()) / ran if ran else None

    def table(self) -> dict[str, Any]:
        return {
            name: {
                "cases": c.cases,
                "passed": c.passed,
                "skipped": c.skipped,
                "pass_rate": c.rate(),
                "failing_ops": c.failing_ops,
                "failing_cases": c.failing_cases,
            }
            for name, c in self.categories.items()
        }

    def precision(self) -> dict[str, Any]:
        return {
            dtype: {
                "samples": len(errs),
                "max": max(errs) if errs else None,
                "mean": sum(errs) / len(errs) if errs else None,
                "p99": percentile(errs, 99) if errs else None,
            }
            for dtype, errs in self.errors.items()
        }

    def emit(self, rec: Any) -> None:
        """The metrics gates.yaml reads (names are a contract)."""
        rec.metric("op_pass_rate", self.overall(), "ratio", "higher", description="catalog cases passed / run")
        for name, c in self.categories.items():
            rec.metric(f"op_pass_rate.{name}", c.rate(), "ratio", "higher")
        everything: list[float] = []
        for dtype, errs in self.errors.items():
            everything.extend(errs)
            rec.metric(
                f"max_rel_error.{dtype}",
                max(errs) if errs else None,
                "ratio",
                "lower",
                samples=list(errs),
                description=f"max normwise relative error vs CPU float64; samples: one per case x seed in {dtype}",
            )
            if errs:
                rec.metric(f"rel_error_p99.{dtype}", percentile(errs, 99), "ratio", "lower")
                rec.metric(f"rel_error_mean.{dtype}", sum(errs) / len(errs), "ratio", "lower")
        if everything:
            rec.metric(
                "max_rel_error",
                max(everything),
                "ratio",
                "lower",
                samples=everything,
                description="max over all dtypes (bfloat16 dominates: gate the per-dtype metrics)",
            )


def _fmt(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return format(x, spec)
    return str(x)


def write_markdown(path: Path, summary: dict[str, Any], device: str) -> Path:
    lines = [f"# functional_test on {device}", ""]
    cats = summary.get("categories", {})
    if cats:
        lines += ["| category | cases | passed | pass rate | failing ops |", "| --- | ---: | ---: | ---: | --- |"]
        for name, c in cats.items():
            rate = "n/a" if c["pass_rate"] is None else f"{100 * c['pass_rate']:.1f}%"
            ops = ", ".join(f"`{o}`" for o in c["failing_ops"]) or "-"
            lines.append(f"| {name} | {c['cases']} | {c['passed']} | {rate} | {ops} |")
        lines.append("")
    prec = summary.get("precision", {})
    if prec:
        lines += [
            "## Precision vs CPU float64",
            "",
            "| dtype | samples | max | mean | p99 |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for dtype, p in prec.items():
            lines.append(f"| {dtype} | {p['samples']} | {_fmt(p['max'])} | {_fmt(p['mean'])} | {_fmt(p['p99'])} |")
        lines.append("")
    att = summary.get("attention")
    if att:
        lines += [
            "## Attention (SDPA, one backend forced per case)",
            "",
            "| backend | passed | failed | skipped | long-sequence tokens |",
            "| --- | ---: | ---: | ---: | --- |",
        ]
        for backend, c in att["backends"].items():
            tokens = ", ".join(str(t) for t in att["long_sequence_tokens"].get(backend, []))
            lines.append(f"| {backend} | {c['passed']} | {c['failed']} | {c['skipped']} | {tokens} |")
        lines.append("")
    for key, title in (
        ("distributed", "Distributed"),
        ("traced", "Model-traced ops"),
        ("model", "Whole model vs CPU float64"),
        ("checkpoint", "Checkpoint restore"),
        ("sparse", "Sparse tensors"),
        ("user_cases", "User cases"),
        ("opinfo", "OpInfo sweep"),
        ("golden", "Cross-stack parity (vs a golden)"),
        ("golden_save", "Golden saved"),
    ):
        part = summary.get(key)
        if not part:
            continue
        lines += [f"## {title}", ""]
        for k, value in part.items():
            v = (", ".join(f"`{x}`" for x in value) or "-") if isinstance(value, list) else value
            lines.append(f"- {k.replace('_', ' ')}: {_fmt(v, '.6f' if 'cosine' in k else '.3g')}")
        lines.append("")
    return atomic_write(path, "\n".join(lines))
