"""Performance plots beyond one point: a sweep (latency and throughput vs batch size, a line
per dtype) and a soak (throughput and memory over time). matplotlib as in ``plots``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gatekeeper.contract.metric_points import sort_key, split_point
from gatekeeper.contract.stage_report import StageReport
from gatekeeper.report.plots import Plot, _figure, _literal, _svg, plot_text

__all__ = ["soak_plot", "sweep_plot"]

_COLORS = ("#c2410c", "#1d4ed8", "#15803d", "#7c3aed", "#b45309", "#0f766e", "#be123c", "#4b5563")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def sweep_points(report: StageReport) -> dict[str, tuple[dict[str, str], dict[str, float]]]:
    """point label -> (point, {latency_ms, throughput}) for every measured point."""
    out: dict[str, tuple[dict[str, str], dict[str, float]]] = {}
    for name, metric in report.metrics.items():
        parts = split_point(name)
        if parts is None or metric.value is None:
            continue
        base, point, suffix = parts
        if suffix or base not in ("latency_ms", "throughput"):
            continue
        label = ",".join(f"{k}={point[k]}" for k in sorted(point))
        out.setdefault(label, (point, {}))[1][base] = metric.value
    return out


@_literal
def sweep_plot(report: StageReport) -> Plot | None:
    """Latency and throughput against batch size (else the first key), one line per combination of
    the other keys (dtype, ...); None when the run measured no sweep."""
    points = sweep_points(report)
    if not points:
        return None
    keys = sorted({k for point, _ in points.values() for k in point})
    x_key = "batch_size" if "batch_size" in keys else keys[0]
    others = [k for k in keys if k != x_key]
    lines: dict[str, list[tuple[dict[str, str], dict[str, float]]]] = {}
    for point, values in sorted(points.values(), key=lambda pv: sort_key(pv[0])):
        name = ", ".join(f"{k}={point[k]}" for k in others if k in point) or "all points"
        lines.setdefault(name, []).append((point, values))
    xs_text = sorted({p[x_key] for p, _ in points.values() if x_key in p}, key=lambda v: sort_key({x_key: v}))
    numeric = all(_is_number(v) for v in xs_text)
    title = f"Sweep: latency and throughput vs {x_key}" + (f", a line per {', '.join(others)}" if others else "")
    fig = _figure(9.0, 3.4, left=0.08, right=0.98, bottom=0.2, top=0.86, wspace=0.28)
    fig.suptitle(plot_text(title), fontsize=10)
    for k, (metric, unit) in enumerate((("latency_ms", "ms"), ("throughput", "items/s"))):
        ax = fig.add_subplot(1, 2, k + 1)
        for i, (name, rows) in enumerate(lines.items()):
            pts = [(p[x_key], v[metric]) for p, v in rows if x_key in p and metric in v]
            if not pts:
                continue
            x = [float(a) if numeric else xs_text.index(a) for a, _ in pts]
            ax.plot(
                x,
                [b for _, b in pts],
                marker=_MARKERS[i % len(_MARKERS)],
                color=_COLORS[i % len(_COLORS)],
                label=plot_text(name),
            )
        if numeric:
            ticks = [float(v) for v in xs_text]
            if min(ticks) > 0 and max(ticks) / min(ticks) >= 8:
                ax.set_xscale("log", base=2)  # geometric batch sizes (1 -> 64) spread evenly
            ax.set_xticks(ticks)
            ax.set_xticklabels([plot_text(v) for v in xs_text], fontsize=7)
        else:
            ax.set_xticks(range(len(xs_text)))
            ax.set_xticklabels([plot_text(v) for v in xs_text], fontsize=7, rotation=20)
        ax.set_xlabel(plot_text(x_key), fontsize=8)
        ax.set_ylabel(f"{metric} ({unit})", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3)
        if k == 0 and ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=7)
    return Plot(title, _svg(fig, "sweep"))


@_literal
def soak_plot(series: Sequence[Mapping[str, Any]], report: StageReport | None = None) -> Plot | None:
    """Throughput and memory of each soak window over time; None with fewer than two windows."""
    rows = [r for r in series if _is_number(r.get("t_s"))]
    if len(rows) < 2:
        return None
    span = float(rows[-1]["t_s"])
    scale, unit = (3600.0, "h") if span >= 2 * 3600 else ((60.0, "min") if span >= 120 else (1.0, "s"))
    facts = []
    if report is not None:
        decay = report.metrics.get("throughput_decay")
        growth = report.metrics.get("memory_growth_mb_per_hour")
        if decay is not None and decay.value is not None:
            facts.append(f"throughput decay {decay.value * 100:.1f}%")
        if growth is not None and growth.value is not None:
            facts.append(f"memory growth {growth.value:+.1f} MB/h")
    title = f"Soak: throughput and memory over {span / scale:.3g} {unit}" + (f" ({', '.join(facts)})" if facts else "")
    fig = _figure(8.0, 4.6, left=0.1, right=0.98, bottom=0.11, top=0.9, hspace=0.35)
    fig.suptitle(title, fontsize=10)
    for k, (field, label, color) in enumerate(
        (("throughput", "throughput (items/s)", "#1d4ed8"), ("memory_mb", "memory (MB)", "#c2410c"))
    ):
        ax = fig.add_subplot(2, 1, k + 1)
        pts = [(float(r["t_s"]) / scale, float(r[field])) for r in rows if _is_number(r.get(field))]
        if pts:
            ax.plot(
                [a for a, _ in pts],
                [b for _, b in pts],
                color=color,
                linewidth=1.2,
                marker="." if len(pts) < 60 else None,
            )
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if k == 1:
            ax.set_xlabel(f"time since the soak started ({unit})", fontsize=8)
    return Plot(title, _svg(fig, "soak"))


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return math.isfinite(value)
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
