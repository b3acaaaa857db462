"""Change points over a store's whole history, with what changed in the stack at each.

Every recorded metric is a series per (stage, channel, device, configuration, branch): the runs of one
model on one kind of GPU, oldest first. ``gatekeeper.stats.changepoint`` finds where each series moved;
this module names the first run after each move (pipeline, commit, date) and the stack components that
differ between the run before and that run: torch, ROCm/HIP/CUDA, MIOpen, RCCL, the driver, Python, the
model configuration, gatekeeper's version and the job's image; and the GPU's settings (power cap,
performance level, partitions: ``gatekeeper.contract.gpu_state``).

A change is *confirmed* once a release manager moved the anchor to a run at or after it, or a release
was recorded after it (``gatekeeper.history.anchor``); evaluate's ``history-change`` gate warns only
about unconfirmed ones.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gatekeeper.contract.gpu_state import GPU_STATE
from gatekeeper.contract.gpu_state import text as gpu_state_text
from gatekeeper.history.points import MetricColumn, metric_columns
from gatekeeper.history.sql_schema import AnchorMark, SeriesRow
from gatekeeper.stats.changepoint import ALPHA, ChangePoint, level_changes

__all__ = [
    "STACK", "Change", "bisect_commands", "config_key", "find_changes", "group_key", "image_ref", "run_fields",
    "series_changes", "stack_diff", "stack_of",
]  # fmt: skip

# (label, where it is read): "env:" the stage report's environment, "extra:" its extra facts,
# "stack:" what the recording job added, "config" the run's configuration
STACK = (
    ("torch", "env:torch_version"),
    ("torch commit", "env:torch_git_hash"),
    ("ROCm", "env:rocm_version"),
    ("HIP", "env:hip_version"),
    ("CUDA", "env:cuda_version"),
    ("MIOpen", "extra:miopen_version"),
    ("RCCL", "extra:rccl_version"),
    ("NCCL", "extra:nccl_version"),
    ("driver", "env:driver"),
    ("Python", "env:python"),
    ("model config", "config"),
    ("gatekeeper", "stack:gatekeeper"),
    ("image", "stack:image"),
    *((label, f"extra:{key}") for key, label, _ in GPU_STATE),  # the runner's settings, not its software
)
_CONFIG_KEYS = ("model", "batch_size", "input_shape", "sweep")  # a different value: a different series


@dataclass(frozen=True)
class Change:
    stage: str
    metric: str
    key: Mapping[str, Any]  # channel, device_kind, arch, branch, model: the series
    point: ChangePoint
    before: SeriesRow  # the last run before the change
    first: SeriesRow  # the first run after it
    runs: int  # runs in the series
    stack: tuple[tuple[str, str | None, str | None], ...]  # (component, before, after), only those that differ
    confirmed: bool = False
    # where the change may also lie (its span, when wider than one run): the stack changes at those runs,
    # as (index of the first run after, component, before, after)
    nearby: tuple[tuple[int, str, str | None, str | None], ...] = ()
    # the last run before the span and the first after it: the good and bad ends a bisection starts from
    good: SeriesRow | None = None
    bad: SeriesRow | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "metric": self.metric,
            **dict(self.key),
            "index": self.point.index,
            "runs": self.runs,
            "change": self.point.change,
            "ci": list(self.point.ci),
            "p_value": self.point.p_value,
            "before": self.point.before,
            "after": self.point.after,
            "first_run": run_fields(self.first),
            "last_run_before": run_fields(self.before),
            "stack_changes": [{"component": c, "before": a, "after": b} for c, a, b in self.stack],
            "confirmed": self.confirmed,
            "span": list(self.point.span or (self.point.index, self.point.index)),
            "stack_changes_in_span": [
                {"index": i, "component": c, "before": a, "after": b} for i, c, a, b in self.nearby
            ],
            "bisect": bisect_commands(self),
        }


def bisect_commands(change: Change) -> list[str]:
    """The bisections that start from a change's two ends (the last run before its span, the first after):
    between their commits (``--provider git``) when they differ, and between their images (``--provider
    image``) when only the tag differs; each judged by the change's stage and metric. Each word redacted and
    shell-quoted (``escape.shell_join``): the commits and tags are recorded input."""
    from gatekeeper.core.escape import shell_join

    good, bad = change.good or change.before, change.bad or change.first
    judge = ["--stage", change.stage, "--metric", change.metric.split("[", 1)[0], "--out", "bisect"]
    out = []
    if good.commit and bad.commit and good.commit != bad.commit:
        out.append(["--provider", "git", "--good", good.commit, "--bad", bad.commit, *judge])
    old, new = (image_ref(r.stack.get("image")) for r in (good, bad))
    if old and new and old[0] == new[0] and old[1] != new[1]:
        out.append(["--provider", "image", "--image", old[0], "--good", old[1], "--bad", new[1], *judge])
    return [shell_join(["gatekeeper", "bisect", *argv]) for argv in out]


def image_ref(ref: Any) -> tuple[str, str] | None:
    """(repository, tag) of an image reference; None without a tag (or by digest)."""
    if not isinstance(ref, str) or "@" in ref:
        return None
    repo, sep, tag = ref.rpartition(":")
    return (repo, tag) if sep and repo and tag and "/" not in tag else None


def run_fields(row: SeriesRow) -> dict[str, Any]:
    """Where a recorded run came from, as the JSON outputs name it."""
    return {
        "run_id": row.row_id,
        "pipeline_id": row.pipeline_id,
        "commit": row.commit,
        "ref": row.ref,
        "recorded_at": row.recorded_at,
    }


def group_key(row: SeriesRow) -> tuple[Any, ...]:
    return (row.stage, row.channel, row.device_kind, row.arch, row.ref, config_key(row), row.stack.get("project"))


def config_key(row: SeriesRow) -> tuple[str, ...]:
    """The configuration keys that make a different series (model, batch size, input shape, sweep)."""
    return tuple(json.dumps(row.config.get(k), sort_keys=True, default=str) for k in _CONFIG_KEYS)


def stack_of(row: SeriesRow) -> dict[str, str | None]:
    env = row.environment
    extra = env.get("extra") if isinstance(env.get("extra"), Mapping) else {}
    out: dict[str, str | None] = {}
    for label, where in STACK:
        kind, _, name = where.partition(":")
        if kind == "env":
            value = env.get(name)
        elif kind == "extra":
            value = extra.get(name)  # type: ignore[union-attr]
            value = None if value is None else gpu_state_text(name, value)  # with its unit: "750 W"
        elif kind == "stack":
            value = row.stack.get(name)
        else:
            value = json.dumps(row.config, sort_keys=True, default=str) if row.config else None
        out[label] = None if value in (None, "") else str(value)
    return out


def stack_diff(before: SeriesRow, after: SeriesRow) -> tuple[tuple[str, str | None, str | None], ...]:
    a, b = stack_of(before), stack_of(after)
    out = []
    for label, _ in STACK:
        if a[label] == b[label]:
            continue
        if label == "model config":
            for key in sorted(set(before.config) | set(after.config)):
                if before.config.get(key) != after.config.get(key):
                    out.append((f"config {key}", _text(before.config.get(key)), _text(after.config.get(key))))
            continue
        out.append((label, a[label], b[label]))
    return tuple(out)


def _text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str) if not isinstance(value, str) else value


def series_changes(
    rows: Sequence[SeriesRow], metric: str, *, marks: Sequence[AnchorMark] = (), alpha: float = ALPHA
) -> list[Change]:
    """The changes of ``metric`` in ``rows`` (one series, oldest first; rows without the metric are left out)."""
    column = metric_columns([(r.points, r.levels) for r in rows], only=metric).get(metric)
    return _column_changes(rows, metric, column, marks=marks, alpha=alpha) if column is not None else []


def _column_changes(
    rows: Sequence[SeriesRow], metric: str, column: MetricColumn, *, marks: Sequence[AnchorMark], alpha: float
) -> list[Change]:
    if len(column.rows) < 6:
        return []
    have = [rows[i] for i in column.rows]
    out = []
    for cp in level_changes(column.levels, column.within, counts=column.counts, alpha=alpha):
        before, first = have[cp.index - 1], have[cp.index]
        key = {
            "channel": first.channel,
            "device_kind": first.device_kind,
            "arch": first.arch,
            "branch": first.ref,
            "model": first.model,
        }
        confirmed = _confirmed(first, have, marks)
        lo, hi = cp.span or (cp.index, cp.index)
        nearby = tuple(
            (i, *diff) for i in range(max(lo, 1), hi + 1) if i != cp.index for diff in stack_diff(have[i - 1], have[i])
        )
        out.append(
            Change(
                first.stage, metric, key, cp, before, first, len(have), stack_diff(before, first), confirmed, nearby,
                have[max(lo, 1) - 1], have[hi],
            )
        )  # fmt: skip
    return out


def _confirmed(first: SeriesRow, rows: Sequence[SeriesRow], marks: Sequence[AnchorMark]) -> bool:
    """A release recorded at or after the change, or an anchor set after it on the same channel and device."""
    if any(r.tag and r.recorded_at >= first.recorded_at for r in rows):
        return True
    return any(
        (m.channel, m.device_kind, m.arch) == (first.channel, first.device_kind, first.arch)
        and m.set_at >= first.recorded_at
        for m in marks
    )


def find_changes(
    rows: Iterable[SeriesRow], *, metric: str | None = None, marks: Sequence[AnchorMark] = ()
) -> list[Change]:
    """Every change of every metric (or of those matching ``metric``: ``name``, ``stage.name`` or a glob)
    in every series of ``rows`` (oldest first), oldest change first."""
    groups: dict[tuple[Any, ...], list[SeriesRow]] = {}
    for row in rows:
        groups.setdefault(group_key(row), []).append(row)
    out: list[Change] = []
    for series in groups.values():
        columns = metric_columns([(r.points, r.levels) for r in series])
        for name in sorted(columns):
            if metric and not _matches(metric, series[0].stage, name):
                continue
            out += _column_changes(series, name, columns[name], marks=marks, alpha=ALPHA)
    return sorted(out, key=lambda c: (c.first.recorded_at, c.stage, c.metric))


def _matches(pattern: str, stage: str, name: str) -> bool:
    return any(fnmatch.fnmatchcase(candidate, pattern) for candidate in (name, f"{stage}.{name}"))
