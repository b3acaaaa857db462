"""Recorded pipeline runs for the report, matrix and advise tests: stage reports built
in code (as the stages write them), kept in the real stores (sqlite, git) that evaluate --record writes."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from gatekeeper.contract.stage_report import Check, Environment, Metric, StageReport, write_stage
from gatekeeper.history import BaselineStore, RunInfo

CATEGORIES = ("basic_math", "convolution", "reduction", "matrix", "custom_backward", "distributed")


def environment(
    *,
    channel: str = "stable",
    torch: str = "2.5.1+rocm6.2",
    rocm: str | None = "6.2.4",
    arch: str | None = "gfx90a:sramecc+:xnack-",
    kind: str = "rocm",
) -> Environment:
    return Environment(
        torch_version=torch,
        python="3.11.7",
        host="runner-1",
        channel=channel,  # type: ignore[arg-type]
        device_kind=kind,  # type: ignore[arg-type]
        rocm_version=rocm,
        hip_version=f"{rocm}.0" if rocm else None,
        device_name="AMD Instinct MI210" if kind == "rocm" else "x86_64",
        device_count=1 if kind != "cpu" else 0,
        gfx_arch=arch if kind == "rocm" else None,
    )


def functional(
    env: Environment,
    *,
    started_at: str,
    pass_rate: float = 0.98,
    restore: float = 1.0,
    failing: Sequence[str] = ("aten.nextafter",),
) -> StageReport:
    cats = {}
    for i, cat in enumerate(CATEGORIES):
        cases = 40 + 5 * i
        bad = list(failing) if pass_rate < 1 and i == 0 else []
        if cat == "convolution" and pass_rate < 0.95:
            bad = [f"aten.convolution[{k}]" for k in range(cases - round(cases * pass_rate))]
        passed = cases - len(bad)
        cats[cat] = {"cases": cases, "passed": passed, "pass_rate": passed / cases, "failing_ops": bad}
    rng = random.Random(started_at)
    metrics = {
        "op_pass_rate": Metric.of(pass_rate, "ratio", "higher"),
        "checkpoint_restore_rate": Metric.of(restore, "ratio", "higher"),
        **{f"op_pass_rate.{c}": Metric.of(v["pass_rate"], "ratio", "higher") for c, v in cats.items()},
    }
    for dtype, scale in (("float32", 1e-6), ("float16", 1e-3), ("bfloat16", 8e-3)):
        samples = [scale * rng.uniform(0.01, 1.0) for _ in range(30)]
        metrics[f"max_rel_error.{dtype}"] = Metric.of(max(samples), "ratio", "lower", samples)
    checks = (
        Check("catalog.basic_math.aten.add", "passed"),
        Check("catalog.basic_math.aten.nextafter", "failed", "mismatch"),
    )
    return StageReport(
        "functional_test",
        "failed" if pass_rate < 1 else "passed",
        started_at,
        12.0,
        env,
        metrics,
        checks,
        config={"model": "stages.models:demo_model", "batch_size": 8, "input_shape": None},
        summary={"categories": cats},
    )


def performance(env: Environment, *, started_at: str, median_ms: float = 20.0, tail_ms: float = 30.0) -> StageReport:
    rng = random.Random(started_at + "perf")
    per_process = []
    for _ in range(3):
        xs = [rng.gauss(median_ms, median_ms * 0.03) for _ in range(200)]
        xs[:3] = [tail_ms * rng.uniform(0.95, 1.05) for _ in range(3)]
        per_process.append(xs)
    flat = sorted(x for p in per_process for x in p)
    q = lambda f: flat[min(len(flat) - 1, int(f * len(flat)))]  # noqa: E731
    metrics = {
        "latency_ms": Metric.of(q(0.5), "ms", "lower", per_process),
        "latency_ms.p50": Metric.of(q(0.5), "ms", "lower"),
        "latency_ms.p99": Metric.of(q(0.99), "ms", "lower"),
        "latency_ms.p999": Metric.of(q(0.999), "ms", "lower"),
        "throughput": Metric.of(8000 / median_ms, "samples/s", "higher"),
        "throughput_cv": Metric.of(0.02, "ratio", "lower"),
        "peak_memory_mb": Metric.of(812.0, "MB", "lower"),
        "memory_growth_mb_per_hour": Metric.of(3.0, "MB/hour", "lower"),
    }
    return StageReport(
        "performance_baseline",
        "passed",
        started_at,
        40.0,
        env,
        metrics,
        (Check("timing", "passed"),),
        config={"model": "stages.models:demo_model", "batch_size": 8, "input_shape": None},
    )


def compatibility(env: Environment, *, started_at: str, onnx: float = 1.0) -> StageReport:
    metrics = {
        "onnx_export_rate": Metric.of(onnx, "ratio", "higher"),
        "collectives_pass_rate": Metric.of(1.0, "ratio", "higher"),
        "deadlocks": Metric.of(0.0, "count", "lower"),
        "sparse_pass_rate": Metric.of(1.0, "ratio", "higher"),
    }
    return StageReport(
        "compatibility_check", "passed", started_at, 9.0, env, metrics, (Check("onnx.export", "passed"),)
    )


def verify(env: Environment, *, started_at: str) -> StageReport:
    metrics = {
        "device_available": Metric.of(1.0 if env.device_kind != "cpu" else 0.0, "bool", "higher"),
        "device_count": Metric.of(float(env.device_count), "devices", "higher"),
        "arch_compatible": Metric.of(1.0, "bool", "higher"),
        "smoke_rel_error.matmul": Metric.of(5.3e-7, "ratio", "lower"),
    }
    checks = (Check("device.visible", "passed", group="device"), Check("smoke.matmul", "passed", group="smoke"))
    return StageReport("verify_hip", "passed", started_at, 6.0, env, metrics, checks)


def pipeline(env: Environment, *, started_at: str, **kw: float) -> list[StageReport]:
    return [
        verify(env, started_at=started_at),
        functional(env, started_at=started_at, pass_rate=kw.get("pass_rate", 0.98), restore=kw.get("restore", 1.0)),
        performance(env, started_at=started_at, median_ms=kw.get("median_ms", 20.0), tail_ms=kw.get("tail_ms", 30.0)),
        compatibility(env, started_at=started_at),
    ]


def write_pipeline(directory: Path, reports: Sequence[StageReport]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for r in reports:
        write_stage(r, directory)
    return directory


def record(
    store: BaselineStore,
    reports: Sequence[StageReport],
    *,
    verdict: str,
    pipeline_id: str,
    commit: str = "abc1234def",
) -> BaselineStore:
    """Keep one pipeline's stage results in ``store`` as ``evaluate --record`` does (recorded when they started)."""
    for r in reports:
        store.save(
            r, RunInfo(ref="main", commit=commit, pipeline_id=pipeline_id, verdict=verdict, recorded_at=r.started_at)
        )
    return store


def sqlite_store(directory: Path) -> BaselineStore:
    """A fresh ``sqlite:`` store (the embedded default) in ``directory``."""
    from gatekeeper.history import open_store

    return open_store(f"sqlite:{directory / 'history.db'}", create=True)


def git_store(directory: Path) -> BaselineStore:
    """A fresh ``git:`` store: a repository in ``directory``, results on the branch gatekeeper-history."""
    import git

    from gatekeeper.history.git import GitStore

    repo = git.Repo.init(directory)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@example.invalid")
    return GitStore("gatekeeper-history", repo=directory)


STORES = {"sqlite": sqlite_store, "git": git_store}


def day(n: int) -> str:
    return f"2026-11-{n:02d}T03:00:00+00:00"
