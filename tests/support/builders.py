"""Build core objects in code for tests (no files involved unless asked)."""

from __future__ import annotations

from typing import Any

from gatekeeper.contract.stage_report import Check, Environment, Metric, StageReport


def env(**kw: Any) -> Environment:
    base: dict[str, Any] = {
        "torch_version": "2.5.1+rocm6.2",
        "python": "3.11.7",
        "host": "runner-1",
        "channel": "stable",
    }
    base |= {"device_kind": "rocm", "gfx_arch": "gfx90a:sramecc+:xnack-", "rocm_version": "6.2.4", "device_count": 1}
    base.update(kw)
    return Environment(**base)


def report(
    stage: str, metrics: dict[str, Any] | None = None, checks: list[Check] | None = None, **kw: Any
) -> StageReport:
    ms = {}
    for name, spec in (metrics or {}).items():
        if isinstance(spec, Metric):
            ms[name] = spec
        elif isinstance(spec, tuple):
            ms[name] = Metric.of(*spec)
        else:
            ms[name] = Metric.of(spec, "ratio", "higher")
    return StageReport(
        stage=stage,
        status=kw.pop("status", "passed"),
        started_at="2026-12-01T10:00:00+00:00",
        duration_s=1.0,
        environment=kw.pop("environment", env()),
        metrics=ms,
        checks=tuple(checks or [Check("ok", "passed")]),
        config=kw.pop("config", {"model": "stages.models:demo_model", "batch_size": 8, "input_shape": None}),
    )
