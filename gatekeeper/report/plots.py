"""Plots for the report, rendered by matplotlib to inline SVG text.

matplotlib is an optional dependency (the ``report`` extra) and is imported only
inside these functions: without it the report still renders, without plots, and
says so. ``Figure`` is used directly rather than pyplot so no global backend or
figure registry is touched.
"""

from __future__ import annotations

import functools
import io
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from gatekeeper.contract.stage_report import Metric
from gatekeeper.core.escape import terminal

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["Plot", "latency_plot", "matplotlib_missing", "plot_text", "precision_plot", "report_plots", "trend_plot"]

_CANDIDATE = "#c2410c"
_BASELINE = "#1d4ed8"
_CHANGE = "#7c3aed"


def plot_text(text: object) -> str:
    """Text from an input (a unit, a metric or sweep key, a run label, a device) as matplotlib shows it literally.

    matplotlib reads a string with an even number of unescaped ``$`` as mathtext (``ms $\\frac{$`` made the
    report crash, exit 70, and a well-formed formula would be drawn as one); ``\\$`` is its escape for a
    literal dollar, and nothing else outside ``$...$`` is markup. Control characters are shown as ``\\xNN``.
    TeX is never used: every plot is drawn under ``_literal`` (``text.usetex`` off, whatever a matplotlibrc
    in the working directory says).
    """
    return terminal(str(text), newlines=False).replace("$", "\\$")


def _literal(draw: Callable[P, R]) -> Callable[P, R]:
    """Draw with ``text.usetex`` off: matplotlib reads it when each text is made and again when it is drawn."""

    @functools.wraps(draw)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        import matplotlib

        with matplotlib.rc_context({"text.usetex": False}):
            return draw(*args, **kwargs)

    return wrapper


@dataclass(frozen=True)
class Plot:
    title: str
    svg: str  # an <svg> element, ids prefixed so several can share one page


def matplotlib_missing() -> str | None:
    """None when plots can be drawn, else why not (shown in the report)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed, so the report has no plots (pip install 'gatekeeper-rocm[report]')"
    return None


def _figure(width: float = 7.0, height: float = 3.2, **margins: float) -> Any:
    from matplotlib.figure import Figure

    # Fixed margins rather than constrained layout: that draws every figure twice (2x slower).
    fig = Figure(figsize=(width, height), dpi=100)
    fig.subplots_adjust(**{"left": 0.1, "right": 0.97, "bottom": 0.16, "top": 0.9, **margins})
    return fig


def _svg(fig: Any, prefix: str) -> str:
    import matplotlib

    buf = io.StringIO()
    # fonttype none: text stays text (smaller, selectable, uses the page's fonts); a fixed
    # hash salt keeps the output reproducible.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "gatekeeper"}):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    # Inline SVGs share the page's id namespace: matplotlib reuses ids such as the marker
    # and clip-path names in every figure, so each plot's ids get their own prefix.
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    for ident in sorted(ids, key=len, reverse=True):
        new = f"{prefix}-{ident}"
        text = text.replace(f'id="{ident}"', f'id="{new}"').replace(f"#{ident})", f"#{new})")
        text = text.replace(f'href="#{ident}"', f'href="#{new}"')
    return text.replace("<svg ", f'<svg role="img" aria-label="{prefix}" ', 1)


@_literal
def latency_plot(
    candidate: Metric,
    baseline: Metric | None,
    marks: Mapping[str, Mapping[str, float | None]],
    *,
    unit: str = "ms",
) -> Plot:
    """ECDF of every latency sample, this run against the baseline, with P50 and P99 marked.

    ``marks``: {"this run": {"P50": x, "P99": y}, "baseline": {...}}.
    """
    import numpy as np

    title = "Latency distribution: this run vs baseline" if baseline else "Latency distribution (no baseline)"
    fig = _figure()
    ax = fig.add_subplot()
    series = [("this run", candidate, _CANDIDATE)]
    if baseline is not None and baseline.flat_samples:
        series.append(("baseline", baseline, _BASELINE))
    for name, metric, color in series:
        xs = np.sort(np.asarray(metric.flat_samples, dtype=float))
        ys = np.arange(1, len(xs) + 1) / len(xs)
        ax.step(xs, ys, where="post", color=color, label=f"{name} (n={len(xs)})")
        for label, style in (("P50", "--"), ("P99", ":")):
            x = (marks.get(name) or {}).get(label)
            if x is None:
                continue
            ax.axvline(x, color=color, linestyle=style, linewidth=1.2)
            # P99 sits near the right edge: its label goes on the left of the line so it is never clipped.
            right = label == "P50"
            ax.annotate(
                f"{label} {_short(x)}",
                (x, 0.5 if right else 0.9),
                xytext=(3 if right else -3, -12 if name == "baseline" else 4),
                textcoords="offset points",
                ha="left" if right else "right",
                fontsize=8,
                color=color,
            )
    ax.set_title(title)
    ax.set_xlabel(plot_text(f"latency per iteration ({unit})"))
    ax.set_ylabel("fraction of iterations ≤ x")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    return Plot(title, _svg(fig, "latency"))


@_literal
def trend_plot(
    series: Sequence[tuple[str, str, Sequence[tuple[str, float]]]],
    *,
    channel: str,
    device: str,
    changes: Mapping[str, Sequence[tuple[int, float]]] | None = None,
) -> Plot:
    """Small multiples: each (metric, unit, [(run label, value)]) over the last runs, oldest to newest;
    ``changes``: metric -> (index of the first run after a change point, relative change), marked."""
    runs = max(len(points) for _, _, points in series)
    title = f"Trends over the last {runs} runs ({channel}, {device})"
    cols = 2 if len(series) > 1 else 1
    rows = -(-len(series) // cols)
    height = 2.6 * rows + 0.5
    fig = _figure(
        9.0 if cols > 1 else 7.0,
        height,
        left=0.08,
        right=0.98,
        top=1 - 0.85 / height,
        bottom=0.75 / height,
        hspace=0.95,
        wspace=0.32,
    )
    fig.suptitle(plot_text(title))
    for k, (metric, unit, points) in enumerate(series):
        ax = fig.add_subplot(rows, cols, k + 1)
        xs = list(range(len(points)))
        ys = [v for _, v in points]
        ax.plot(xs, ys, marker="o", markersize=4, color=_BASELINE)
        ax.plot(xs[-1:], ys[-1:], marker="o", markersize=8, color=_CANDIDATE, linestyle="none", label="this run")
        for n, (index, change) in enumerate((changes or {}).get(metric, ())):
            ax.axvline(
                index - 0.5, color=_CHANGE, linestyle="--", linewidth=1.2, label="change point" if n == 0 else None
            )
            where = (index - 0.5, 1.0)
            ax.annotate(
                f"{change * 100:+.1f}%", where, xycoords=("data", "axes fraction"), xytext=(3, -10),
                textcoords="offset points", fontsize=7, color=_CHANGE,
            )  # fmt: skip
        ax.set_xticks(xs)
        ax.set_xticklabels([plot_text(label) for label, _ in points], rotation=30, ha="right", fontsize=6)
        ax.set_title(plot_text(metric), fontsize=9)
        ax.set_xlabel("run (oldest → newest)", fontsize=8)
        ax.set_ylabel(plot_text(f"{metric.rsplit('.', 1)[-1]} ({_unit(unit)})"), fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3)
        if k == 0 or (changes or {}).get(metric):
            ax.legend(loc="best", fontsize=7)
    return Plot(title, _svg(fig, "trends"))


@_literal
def precision_plot(errors: Mapping[str, Metric], limits: Mapping[str, float] | None = None) -> Plot:
    """Max relative error per dtype (log scale); the per-case samples as dots when recorded."""
    title = "Precision: relative error vs CPU float64 reference, per dtype"
    fig = _figure(7.0, 3.0, left=0.12)
    ax = fig.add_subplot()
    names = list(errors)
    for i, name in enumerate(names):
        metric = errors[name]
        samples = [s for s in metric.flat_samples if s > 0]
        if samples:
            jitter = [i + 0.25 * ((k * 7919) % 97 / 97 - 0.5) for k in range(len(samples))]
            ax.scatter(jitter, samples, s=6, alpha=0.35, color=_BASELINE, label="cases" if i == 0 else None)
        if metric.value is not None and metric.value > 0:
            ax.scatter([i], [metric.value], marker="D", s=40, color=_CANDIDATE, label="max" if i == 0 else None)
            ax.annotate(f"{metric.value:.2g}", (i, metric.value), xytext=(6, 0), textcoords="offset points", fontsize=8)
        limit = (limits or {}).get(name)
        if limit:
            ax.hlines(limit, i - 0.4, i + 0.4, colors="#b91c1c", linestyles="--", label="gate" if i == 0 else None)
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([plot_text(n) for n in names])
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("dtype")
    ax.set_ylabel("relative error (ratio, log scale)")
    ax.grid(alpha=0.3, axis="y")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)
    return Plot(title, _svg(fig, "precision"))


def _short(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _unit(unit: str) -> str:
    return {"bool": "0/1", "": "no unit"}.get(unit, unit)


# (stage, metric) shown as trends when at least two runs measured them.
TREND_METRICS = (
    ("functional_test", "op_pass_rate"),
    ("functional_test", "checkpoint_restore_rate"),
    ("functional_test", "max_rel_error.float32"),
    ("performance_baseline", "latency_ms.p50"),
    ("performance_baseline", "latency_ms.p99"),
    ("performance_baseline", "throughput"),
    ("performance_baseline", "peak_memory_mb"),
    ("compatibility_check", "onnx_export_rate"),
    ("verify_hip", "smoke_rel_error.matmul"),
)
DTYPES = ("float32", "float16", "bfloat16")


def report_plots(data: Any) -> list[Plot]:
    """Every plot the data supports (``data``: a ReportData), in reading order."""
    from gatekeeper.evaluate.metrics import resolve
    from gatekeeper.report.data import history_points, trend_changes

    plots: list[Plot] = []
    perf = data.reports.get("performance_baseline")
    latency = perf.metrics.get("latency_ms") if perf else None
    if latency is not None and latency.flat_samples:
        base_report = data.baselines.get("performance_baseline")
        base = base_report.metrics.get("latency_ms") if base_report else None
        marks = {}
        for name, report in (("this run", perf), ("baseline", base_report)):
            if report is not None:
                marks[name] = {
                    label: resolve(f"performance_baseline.latency_ms.{label.lower()}", {report.stage: report}).value
                    for label in ("P50", "P99")
                }
        plots.append(latency_plot(latency, base, marks, unit=latency.unit or "ms"))
    if perf is not None or data.soak_series:
        from gatekeeper.report.perf_plots import soak_plot, sweep_plot

        extra = [sweep_plot(perf) if perf is not None else None, soak_plot(data.soak_series, perf)]
        plots += [p for p in extra if p is not None]
    functional = data.reports.get("functional_test")
    if functional is not None:
        errors = {
            d: functional.metrics[f"max_rel_error.{d}"] for d in DTYPES if f"max_rel_error.{d}" in functional.metrics
        }
        if errors:
            plots.append(precision_plot(errors, _precision_limits(data)))
    env = data.environment
    device = "?" if env is None else env.device_kind if env.arch == env.device_kind else f"{env.device_kind} {env.arch}"
    series = []
    for stage, metric in TREND_METRICS:
        runs = data.history.get(stage, ())
        points = history_points(runs, metric)
        if len(points) >= 2:
            unit = next(
                (
                    r.report.metrics[m].unit
                    for r in runs
                    for m in (metric, metric.rsplit(".", 1)[0])
                    if m in r.report.metrics
                ),
                "",
            )
            series.append((f"{stage}.{metric}", unit, points))
    changes = {
        f"{stage}.{metric}": [(c.index, c.change) for c in trend_changes(data.history.get(stage, ()), metric)]
        for stage, metric in TREND_METRICS
    }
    if series:
        plots.append(trend_plot(series, channel=data.channel, device=device, changes=changes))
    return plots


def _precision_limits(data: Any) -> dict[str, float]:
    """Absolute per-dtype limits from the verdict's precision gates (``<= N`` rules)."""
    out: dict[str, float] = {}
    if data.verdict is None:
        return out
    for gate in data.verdict.gates:
        m = re.fullmatch(r"functional_test\.max_rel_error\.(\w+)", gate.metric)
        # only absolute rules: a signed rule ("<= +100%") is a change against the baseline
        rule = re.fullmatch(r"\s*<=?\s*([0-9][0-9.eE+-]*)\s*(%?)\s*", gate.rule or "")
        if m and rule:
            out[m.group(1)] = float(rule.group(1)) / (100 if rule.group(2) else 1)
    return out
