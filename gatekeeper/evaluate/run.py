"""``gatekeeper evaluate`` as a visible sequence of steps:
load gates, read artifacts, read JUnit files, load baselines, evaluate, write outputs.
Each step is a function of its own; ``evaluate`` itself is pure."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from pathlib import Path

from gatekeeper.contract.junit import JUnitSummary, expand, summarize
from gatekeeper.contract.stage_report import StageReport, read_artifacts
from gatekeeper.contract.verdict import Verdict, write_verdict
from gatekeeper.core import files
from gatekeeper.core.ci_context import PipelineContext
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import Gates, load_gates
from gatekeeper.evaluate.outputs import to_junit, to_markdown, to_metrics_txt
from gatekeeper.history import RunInfo, comparability, open_store

__all__ = ["load_baselines", "read_junit", "record_run", "resolve_channel", "run_evaluate", "write_outputs"]


def run_evaluate(
    *,
    artifacts: Path,
    gates_path: Path,
    out: Path,
    baseline: str | None = None,
    channel: str | None = None,
    environ: Mapping[str, str] | None = None,
    today: dt.date | None = None,
    not_selected: frozenset[str] = frozenset(),
    record: str | None = None,
) -> Verdict:
    env = dict(os.environ if environ is None else environ)
    gates = load_gates(gates_path)
    reports = read_artifacts(artifacts)
    junit = read_junit(gates)
    baselines, notes = load_baselines(baseline, reports, env)
    now = dt.datetime.now(dt.timezone.utc)
    verdict = evaluate(
        Inputs(
            gates=gates,
            reports=reports,
            channel=resolve_channel(channel, reports, env),
            today=today or now.date(),
            context=PipelineContext.from_env(env),
            baselines=baselines,
            baseline_notes=notes,
            junit=junit,
            environ=env,
            generated_at=now.isoformat(timespec="seconds"),
            not_selected=not_selected,
        )
    )
    write_outputs(verdict, out)
    if record:
        record_run(record, reports, verdict, env)
    return verdict


def record_run(spec: str, reports: Mapping[str, StageReport], verdict: Verdict, environ: Mapping[str, str]) -> None:
    """Keep this run's stage results and verdict in a history store (for baselines, reports, the breaker)."""
    ctx = PipelineContext.from_env(environ)
    info = RunInfo(
        ref=ctx.ref or ctx.tag,
        commit=ctx.commit,
        pipeline_id=ctx.pipeline_id,
        verdict=verdict.result,
        recorded_at=verdict.generated_at,
    )
    store = open_store(spec, environ)
    for report in reports.values():
        store.save(report, info)


def resolve_channel(explicit: str | None, reports: Mapping[str, StageReport], environ: Mapping[str, str]) -> str:
    """--channel, else $GATEKEEPER_CHANNEL, else what the stages recorded, else stable."""
    if explicit:
        return explicit
    if environ.get("GATEKEEPER_CHANNEL") in ("stable", "nightly"):
        return environ["GATEKEEPER_CHANNEL"]
    channels = {r.environment.channel for r in reports.values()}
    return channels.pop() if len(channels) == 1 else "stable"


def read_junit(gates: Gates) -> dict[str, JUnitSummary | None]:
    out: dict[str, JUnitSummary | None] = {}
    for gate in gates.gates:
        if gate.junit:
            paths = expand(gate.junit)
            out[gate.name] = summarize(paths) if paths else None
    return out


def load_baselines(
    spec: str | None, reports: Mapping[str, StageReport], environ: Mapping[str, str]
) -> tuple[dict[str, StageReport], dict[str, str]]:
    """stage -> comparable baseline, and stage -> why there is none (in plain words)."""
    if not spec:
        return {}, {}
    store = open_store(spec, environ)
    found: dict[str, StageReport] = {}
    notes: dict[str, str] = {}
    for stage, report in reports.items():
        base = store.latest(stage, report)
        if base is not None and comparability(base, report) is None:
            found[stage] = base
            continue
        why = getattr(store, "why_missing", "")  # stores that know better say why themselves
        history = [] if why else store.history(stage, limit=1)
        if why:
            notes[stage] = why
        elif history:
            reason = comparability(history[0][1], report) or "the stored result is not comparable"
            notes[stage] = f"{reason} (a new device or configuration)"
        else:
            notes[stage] = f"the store {spec} has no {stage} result yet (first run of this branch or device)"
    return found, notes


def write_outputs(verdict: Verdict, out: Path) -> None:
    """verdict.json, verdict.md, gates.junit.xml, metrics.txt; each written atomically."""
    verdict.to_dict()  # fails before anything is written if the verdict cannot be serialised
    rendered: dict[str, str | bytes] = {
        "verdict.md": to_markdown(verdict),
        "gates.junit.xml": to_junit(verdict),
        "metrics.txt": to_metrics_txt(verdict),
    }
    for name, data in rendered.items():
        files.atomic_write(out / name, data)
    write_verdict(verdict, out / "verdict.json")  # last: its presence means the set is complete
