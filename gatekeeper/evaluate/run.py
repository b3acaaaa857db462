"""``gatekeeper evaluate`` as a visible sequence of steps:
load gates, read artifacts, read JUnit files, load baselines, evaluate, write outputs.
Each step is a function of its own; ``evaluate`` itself is pure."""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gatekeeper.contract.junit import JUnitSummary, expand, summarize
from gatekeeper.contract.stage_names import STAGE_NAMES
from gatekeeper.contract.stage_report import StageReport, read_artifacts
from gatekeeper.contract.verdict import Verdict, write_verdict
from gatekeeper.core import budgets, files
from gatekeeper.core.ci_context import PipelineContext
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import Gates, default_gates_path, load_gates_text
from gatekeeper.evaluate.gates_diff import differences, gates_at_ref
from gatekeeper.evaluate.outputs import reproduce_command, to_junit, to_markdown, to_metrics_txt
from gatekeeper.history import BASELINE_VERDICTS, RunInfo, baseline_branch, comparability, open_store

__all__ = [
    "Baselines",
    "load_baselines",
    "provenance",
    "read_junit",
    "record_run",
    "resolve_channel",
    "run_evaluate",
    "write_outputs",
]


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
    record_blocked: bool = False,
    gates_ref: str | None = None,
) -> Verdict:
    env = dict(os.environ if environ is None else environ)
    gates, gates_text, gate_warnings = load_applied_gates(gates_path, gates_ref)
    reports = read_artifacts(artifacts)
    junit = read_junit(gates)
    found = load_baselines(baseline, reports, env)
    warnings = [*gate_warnings, *found.warnings]
    now = dt.datetime.now(dt.timezone.utc)
    verdict = evaluate(
        Inputs(
            gates=gates,
            reports=reports,
            channel=resolve_channel(channel, reports, env),
            today=today or now.date(),
            context=PipelineContext.from_env(env),
            baselines=found.reports,
            baseline_notes=found.notes,
            baseline_runs=found.runs,
            junit=junit,
            environ=env,
            generated_at=now.isoformat(timespec="seconds"),
            not_selected=not_selected,
            warnings=tuple(warnings),
            provenance=provenance(gates_text, artifacts, gates_ref),
        )
    )
    stages = [s for s in STAGE_NAMES if s not in not_selected] if not_selected else []
    reproduce = reproduce_command(
        artifacts=artifacts, gates=gates_path, channel=verdict.channel, baseline=baseline, stages=stages,
        gates_ref=gates_ref,
    )  # fmt: skip
    write_outputs(verdict, out, reproduce=reproduce)
    if record:
        if verdict.result in BASELINE_VERDICTS or record_blocked:
            record_run(record, reports, verdict, env)
        else:
            print(
                f"gatekeeper: not recording this {verdict.result} run in {record}: a blocked run never becomes "
                "a baseline (--record-blocked keeps it anyway, marked blocked)",
                file=sys.stderr,
            )
    return verdict


def load_applied_gates(gates_path: Path, gates_ref: str | None) -> tuple[Gates, bytes, list[str]]:
    """The gates to apply, their bytes, and warnings. With ``gates_ref`` (a merge request's target branch) the
    gates file of that ref applies, and every difference of the working tree's copy is a named warning."""
    mine_text = files.read_text(gates_path, what="gates file", max_bytes=budgets.MAX_YAML_BYTES)
    mine = load_gates_text(mine_text, str(gates_path))
    if not gates_ref:
        return mine, mine_text.encode(), []
    builtin = default_gates_path(cwd=Path("/nonexistent-dir"))
    local = gates_path if Path(gates_path).resolve() != builtin.resolve() else Path("gates.yaml")
    text = gates_at_ref(gates_ref, local)
    warnings = []
    if text is None:
        text = files.read_text(builtin, what="gates file", max_bytes=budgets.MAX_YAML_BYTES)
        source = f"built-in default gates ({gates_ref} has no {local})"
        if Path(gates_path).resolve() != builtin.resolve():
            warnings.append(f"{gates_ref} has no {local}: the built-in default gates apply, not this branch's")
    else:
        source = f"{gates_ref}:{local}"
        if Path(gates_path).resolve() == builtin.resolve():
            warnings.append(f"this branch deletes {local}: {gates_ref}'s {local} applies")
    applied = load_gates_text(text, source)
    for line in differences(applied, mine, ref=gates_ref):
        warnings.append(f"{gates_path} differs from {source}, which applies: {line}")
    return applied, text.encode(), warnings


def provenance(gates_bytes: bytes, artifacts: Path, gates_ref: str | None = None) -> dict[str, object]:
    """What this verdict was computed from: gatekeeper's version, the gates file's and every artifact's sha256."""
    import hashlib

    from gatekeeper import __version__

    arts = {
        p.name: _sha256(p) for p in sorted(Path(artifacts).glob("*")) if p.is_file() and p.suffix in (".json", ".xml")
    }
    for name in ("verdict.json", "gates.junit.xml"):  # this verdict's own outputs, from an earlier evaluate
        arts.pop(name, None)
    return {
        "gatekeeper_version": __version__,
        "gates_sha256": hashlib.sha256(gates_bytes).hexdigest(),
        "gates_ref": gates_ref,
        "artifacts": arts,
    }


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


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


@dataclass
class Baselines:
    reports: dict[str, StageReport] = field(default_factory=dict)  # stage -> comparable baseline
    notes: dict[str, str] = field(default_factory=dict)  # stage -> why there is none (in plain words)
    runs: dict[str, dict[str, str | None]] = field(default_factory=dict)  # stage -> where the baseline came from
    warnings: list[str] = field(default_factory=list)  # records skipped as unusable


def load_baselines(spec: str | None, reports: Mapping[str, StageReport], environ: Mapping[str, str]) -> Baselines:
    """The policy: per stage, the newest result of the same channel and device fingerprint, from the baseline
    branch (a merge request's target, else the protected branch; ``baseline_branch``), whose run passed or warned."""
    out = Baselines()
    if not spec:
        return out
    store = open_store(spec, environ)
    branch = baseline_branch(environ)
    found, notes = out.reports, out.notes
    for stage, report in reports.items():
        record = store.latest_record(stage, report, branch=branch)
        for line in getattr(store, "skipped", ()):
            print(f"gatekeeper: warning: {line}", file=sys.stderr)
            out.warnings.append(line)
        if record is not None and comparability(record[1], report) is None:
            found[stage] = record[1]
            out.runs[stage] = record[0].to_dict()
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
    return out


def write_outputs(verdict: Verdict, out: Path, *, reproduce: str | None = None) -> None:
    """verdict.json, verdict.md, gates.junit.xml, metrics.txt; each written atomically."""
    verdict.to_dict()  # fails before anything is written if the verdict cannot be serialised
    rendered: dict[str, str | bytes] = {
        "verdict.md": to_markdown(verdict, reproduce),
        "gates.junit.xml": to_junit(verdict),
        "metrics.txt": to_metrics_txt(verdict),
    }
    for name, data in rendered.items():
        files.atomic_write(out / name, data)
    write_verdict(verdict, out / "verdict.json")  # last: its presence means the set is complete
