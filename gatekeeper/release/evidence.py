"""Evidence for ``gatekeeper advise``: both channels' recent recorded runs on one device,
and the circuit breakers' states, reduced to the few numbers the advice weighs."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.history import BaselineStore, history_noting

__all__ = ["ChannelEvidence", "collect_evidence", "read_breakers"]


@dataclass(frozen=True)
class ChannelEvidence:
    channel: str
    runs: int = 0  # recorded pipelines on this device, newest ``limit``
    verdicts: Mapping[str, int] = field(default_factory=dict)  # pass / warn / blocked / unknown
    op_pass_rate: float | None = None  # median over the runs
    restore_rate: float | None = None  # lowest over the runs: one lost checkpoint matters
    p99_ms: float | None = None  # median of the runs' P99 latency
    breaker: str | None = None  # closed / open / half_open, when a state file was given

    @property
    def blocked_share(self) -> float | None:
        known = sum(v for k, v in self.verdicts.items() if k != "unknown")
        return self.verdicts.get("blocked", 0) / known if known else None


def collect_evidence(
    store: BaselineStore | None,
    arch: str | None,
    limit: int,
    breakers: Mapping[str, str],
    notes: list[str] | None = None,
) -> tuple[dict[str, ChannelEvidence], str | None]:
    """Both channels' newest ``limit`` pipelines on ``arch`` (default: the newest run's arch); the records the
    store left out go into ``notes``."""
    stages = ("functional_test", "performance_baseline", "verify_hip", "compatibility_check")
    left_out: list[str] = [] if notes is None else notes
    history = {
        (s, ch): history_noting(store, s, left_out, channel=ch, limit=limit * 4) if store else []
        for s in stages
        for ch in ("stable", "nightly")
    }
    if arch is None:
        latest = max(
            (r for rows in history.values() for r in rows),
            key=lambda x: x[0].recorded_at or x[1].started_at,
            default=None,
        )
        arch = latest[1].environment.arch if latest else None
    out = {}
    for ch in ("stable", "nightly"):
        pipelines: dict[str, dict[str, Any]] = {}
        for stage in stages:
            for info, report in history[(stage, ch)]:
                if report.environment.arch != arch:
                    continue
                # One pipeline's stages share its id, else the time its verdict was recorded.
                key = info.pipeline_id or (
                    f"{info.commit}@{info.recorded_at}" if info.recorded_at else report.started_at
                )
                p = pipelines.setdefault(key, {"at": info.recorded_at or report.started_at, "verdict": None})
                p["verdict"] = p["verdict"] or info.verdict
                p[stage] = report
        newest = sorted(pipelines.values(), key=lambda p: p["at"], reverse=True)[:limit]
        verdicts: dict[str, int] = {}
        for p in newest:
            verdicts[p["verdict"] or "unknown"] = verdicts.get(p["verdict"] or "unknown", 0) + 1
        out[ch] = ChannelEvidence(
            ch,
            len(newest),
            verdicts,
            _median(_values(newest, "functional_test", "op_pass_rate")),
            min(_values(newest, "functional_test", "checkpoint_restore_rate"), default=None),
            _median(_values(newest, "performance_baseline", "latency_ms.p99")),
            breakers.get(ch),
        )
    return out, arch


def _values(pipelines: Sequence[Mapping[str, Any]], stage: str, metric: str) -> list[float]:
    out = []
    for p in pipelines:
        m = p[stage].metrics.get(metric) if stage in p else None
        if m is not None and m.value is not None:
            out.append(m.value)
    return out


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


_SEVERITY = {"closed": 0, "half_open": 1, "open": 2}


def read_breakers(paths: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """channel -> the worst breaker state over its jobs; files or directories of
    ``gatekeeper breaker`` state (one object, or the list ``breaker status --json`` prints)."""
    worst: dict[str, str] = {}
    notes = []
    for spec in paths:
        path = Path(spec)
        if not path.exists() and not path.is_symlink():  # a symlink loop is refused by read_json, not "absent"
            notes.append(f"no breaker state at {path}: no breaker has recorded anything (all closed)")
            continue
        for f in sorted(path.glob("*.json")) if path.is_dir() else [path]:
            doc = files.read_json(f, what="breaker state")
            items = doc if isinstance(doc, list) else [doc]
            for i, item in enumerate(items):
                if not isinstance(item, dict) or item.get("state") not in _SEVERITY or not item.get("channel"):
                    where = f"[{i}]" if isinstance(doc, list) else ""
                    raise InputError(
                        f,
                        where,
                        "not a gatekeeper breaker state (needs channel and state)",
                        "pass the file 'gatekeeper breaker' writes",
                    )
                ch, st = str(item["channel"]), str(item["state"])
                if _SEVERITY[st] >= _SEVERITY.get(worst.get(ch, "closed"), 0):
                    worst[ch] = st
    return worst, notes
