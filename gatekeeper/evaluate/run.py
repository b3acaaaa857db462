"""``gatekeeper evaluate`` as a visible sequence of steps:
load gates, read artifacts, read JUnit files, load baselines, evaluate, write outputs.
Each step is a function of its own; ``evaluate`` itself is pure."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from gatekeeper.contract.junit import JUnitSummary, expand, summarize
from gatekeeper.contract.stage_names import STAGE_NAMES
from gatekeeper.contract.stage_report import StageReport, read_artifacts
from gatekeeper.contract.verdict import Verdict, write_verdict
from gatekeeper.core import budgets, digest, files
from gatekeeper.core.ci_context import PipelineContext
from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.anchors import load_references
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import Gates, default_gates_path, load_gates_text
from gatekeeper.evaluate.gates_diff import differences, gates_at_ref
from gatekeeper.evaluate.outputs import OUTPUTS, reproduce_command, to_junit, to_markdown, to_metrics_txt
from gatekeeper.history import BASELINE_VERDICTS, RunInfo, baseline_branch, comparability, open_store

__all__ = [
    "CHANNELS",
    "SPOOL_FILE",
    "Baselines",
    "check_channels",
    "clear_outputs",
    "load_baselines",
    "provenance",
    "read_junit",
    "record_run",
    "resolve_channel",
    "run_evaluate",
    "write_outputs",
]

CHANNELS = ("stable", "nightly")


SPOOL_FILE = "history-spool.jsonl"  # beside the verdict: the records a store could not take (history import)


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
    log: Callable[[str], None] = lambda _line: None,
) -> Verdict:
    """Evaluate and write the outputs; ``log`` gets what the reader should know beyond the verdict (the CLI
    passes the terminal writer; this module never prints)."""
    env = dict(os.environ if environ is None else environ)
    clear_outputs(out)  # before anything can fail: a failed run leaves no verdict behind
    job_channel, channel_source = resolve_channel(channel, env)
    context = PipelineContext.from_env(env)
    gates, gates_text, gate_warnings = load_applied_gates(
        gates_path, gates_ref, in_merge_request=context.is_merge_request
    )
    reports = read_artifacts(artifacts)
    check_channels(reports, artifacts, job_channel, channel_source)
    junit = read_junit(gates)
    found = load_baselines(baseline, reports, env, channel=job_channel)
    warnings = [*gate_warnings, *found.warnings]
    now = dt.datetime.now(dt.timezone.utc)
    refs = load_references(baseline, gates, reports, env, now, stack=run_stack(env))
    verdict = evaluate(
        Inputs(
            gates=gates,
            reports=reports,
            channel=job_channel,
            today=today or now.date(),
            context=context,
            baselines=found.reports,
            baseline_notes=found.notes,
            baseline_runs=found.runs,
            junit=junit,
            environ=env,
            generated_at=now.isoformat(timespec="seconds"),
            not_selected=not_selected,
            warnings=tuple(warnings),
            provenance=provenance(gates_text, artifacts, gates_ref),
            anchors=refs.anchors,
            anchor_notes=refs.anchor_notes,
            anchor_runs=refs.anchor_runs,
            history_changes=refs.history_changes,
            history_notes=refs.history_notes,
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
            record_run(record, reports, verdict, env, spool=out / SPOOL_FILE)
        else:
            log(
                f"gatekeeper: not recording this {verdict.result} run in {record}: a blocked run never becomes "
                "a baseline (--record-blocked keeps it anyway, marked blocked)"
            )
    return verdict


def clear_outputs(out: Path) -> None:
    """Remove every file evaluate owns in ``out`` (verdict.json first); InputError when one cannot be removed."""
    for name in OUTPUTS:
        path = Path(out) / name
        try:
            path.unlink(missing_ok=True)
        except OSError as err:
            raise InputError(
                path, "", f"cannot remove the earlier {name}: {err.strerror}",
                "evaluate owns this name in --out: remove what is there, or pass another --out",
            ) from None  # fmt: skip


def load_applied_gates(
    gates_path: Path, gates_ref: str | None, *, in_merge_request: bool = False
) -> tuple[Gates, bytes, list[str]]:
    """The gates to apply, their bytes, and warnings. With ``gates_ref`` (a merge request's target branch) the
    gates file of that ref applies, and every difference of the working tree's copy is a named warning.

    A gates file this branch has and ``gates_ref`` lacks: outside a merge request the built-in defaults apply
    (with a warning); in a merge request it is an input error, never the defaults the merge request picked."""
    mine_text = files.read_text(gates_path, what="gates file", max_bytes=budgets.MAX_YAML_BYTES)
    mine = load_gates_text(mine_text, str(gates_path))
    if not gates_ref:
        return mine, mine_text.encode(), []
    builtin = default_gates_path(cwd=Path("/nonexistent-dir"))
    uses_builtin = Path(gates_path).resolve() == builtin.resolve()
    local = Path("gates.yaml") if uses_builtin else Path(gates_path)
    text = gates_at_ref(gates_ref, local)
    warnings = []
    if text is None:
        if in_merge_request and not uses_builtin:
            raise InputError(
                None,
                "--gates-ref",
                f"{gates_ref} has no {local}: this merge request's own {local} would judge it, or built-in "
                "defaults it did not choose",
                f"add {local} to the target branch first; to bootstrap, a maintainer sets the CI variable "
                "GATEKEEPER_GATES_FROM_TARGET=0 for that one merge request",
            )
        text = files.read_text(builtin, what="gates file", max_bytes=budgets.MAX_YAML_BYTES)
        source = f"built-in default gates ({gates_ref} has no {local})"
        if not uses_builtin:
            warnings.append(f"{gates_ref} has no {local}: the built-in default gates apply, not this branch's")
    else:
        source = f"{gates_ref}:{local}"
        if uses_builtin:
            warnings.append(f"this branch deletes {local}: {gates_ref}'s {local} applies")
    applied = load_gates_text(text, source)
    for line in differences(applied, mine, ref=gates_ref):
        warnings.append(f"{gates_path} differs from {source}, which applies: {line}")
    return applied, text.encode(), warnings


# Every artifact gatekeeper reads is smaller (budgets.MAX_JSON_BYTES for a stage report); a JUnit file this size
# is hashed in a few seconds (sha256 at about 280 MB/s, core/digest.py).
PROVENANCE_MAX_BYTES = 1 << 30


def provenance(gates_bytes: bytes, artifacts: Path, gates_ref: str | None = None) -> dict[str, object]:
    """What this verdict was computed from: gatekeeper's version, the gates file's and every artifact's sha256."""
    from gatekeeper import __version__

    arts: dict[str, str] = {}
    not_hashed: dict[str, str] = {}
    for p in sorted(Path(artifacts).glob("*")):
        if p.suffix not in (".json", ".xml") or p.name in ("verdict.json", "gates.junit.xml"):  # our own outputs
            continue
        # a stage job wrote these: only a regular file, and at most PROVENANCE_MAX_BYTES of it (before, a sparse
        # file of a terabyte named junk.json, or a link to one, was hashed for hours; a FIFO swapped in after
        # is_file() blocked the open). What is not hashed is named with why.
        try:
            arts[p.name] = digest.file_sha256(p, max_bytes=PROVENANCE_MAX_BYTES, what="stage artifact")
        except InputError as err:
            if not p.is_dir():  # a directory named x.json was never an artifact
                not_hashed[p.name] = err.problem
    return {
        "gatekeeper_version": __version__,
        "gates_sha256": digest.sha256(gates_bytes).hexdigest(),
        "gates_ref": gates_ref,
        "artifacts": arts,
        **({"not_hashed": not_hashed} if not_hashed else {}),
    }


def record_run(
    spec: str,
    reports: Mapping[str, StageReport],
    verdict: Verdict,
    environ: Mapping[str, str],
    *,
    spool: Path = Path(SPOOL_FILE),
) -> None:
    """Keep this run's stage results and verdict in a history store (for baselines, anchors, reports, the
    breaker). A store that cannot be reached is tried twice; then the records wait in ``spool``."""
    from gatekeeper.history.transfer import record

    ctx = PipelineContext.from_env(environ)
    info = RunInfo(
        ref=ctx.ref or ctx.tag,
        commit=ctx.commit,
        pipeline_id=ctx.pipeline_id,
        verdict=verdict.result,
        recorded_at=verdict.generated_at,
        tag=ctx.tag,
        stack=run_stack(environ),
    )
    record(spec, [(report, info) for report in reports.values()], spool=spool, environ=environ)


def run_stack(environ: Mapping[str, str]) -> dict[str, str | None]:
    """What a stage report does not say about the run: gatekeeper's version, the job's image, the repository."""
    from gatekeeper import __version__

    return {
        "gatekeeper": __version__,
        "image": environ.get("CI_JOB_IMAGE") or None,
        "project": environ.get("CI_PROJECT_PATH") or None,  # a shared store keeps each repository's runs apart
    }


def resolve_channel(explicit: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """The job's channel and where it came from: --channel, else $GATEKEEPER_CHANNEL, else stable.

    Never the artifacts': what a stage reports about its channel is checked against this (``check_channels``)."""
    if explicit:
        return _channel(explicit, "--channel"), "--channel"
    if environ.get("GATEKEEPER_CHANNEL"):
        return _channel(environ["GATEKEEPER_CHANNEL"], "$GATEKEEPER_CHANNEL"), "$GATEKEEPER_CHANNEL"
    return "stable", "the default: no --channel, no $GATEKEEPER_CHANNEL"


def _channel(value: str, where: str) -> str:
    if value not in CHANNELS:
        raise InputError(None, where.lstrip("$"), f"unknown channel {value!r}", f"use one of: {', '.join(CHANNELS)}")
    return value


def check_channels(reports: Mapping[str, StageReport], artifacts: Path, channel: str, source: str) -> None:
    """Every artifact must report the job's channel: one that claims another is an input error naming both."""
    for stage, report in sorted(reports.items()):
        claimed = report.environment.channel
        if claimed != channel:
            named = Path(artifacts) / f"{stage}.json"
            raise InputError(
                named if named.exists() else artifacts,
                "environment.channel",
                f"the artifact says channel {claimed!r}, this job's channel is {channel!r} ({source})",
                f"evaluate {claimed} artifacts in a {claimed} job (--channel {claimed}); a job's channel comes from "
                "--channel or $GATEKEEPER_CHANNEL, never from its artifacts",
            )


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


def load_baselines(
    spec: str | None, reports: Mapping[str, StageReport], environ: Mapping[str, str], *, channel: str
) -> Baselines:
    """The policy: per stage, the newest result of the job's ``channel`` and the run's device fingerprint, from the
    baseline branch (a merge request's target, else the protected branch; ``baseline_branch``), whose run passed
    or warned. The channel is the job's, never the one the artifact reports about itself."""
    out = Baselines()
    if not spec:
        return out
    store = open_store(spec, environ, missing_ok=True)  # a first run: the store does not exist yet
    branch = baseline_branch(environ)
    found, notes = out.reports, out.notes
    for stage, claimed in reports.items():
        report = replace(claimed, environment=replace(claimed.environment, channel=channel))  # type: ignore[arg-type]
        record = store.latest_record(stage, report, branch=branch)
        out.warnings += getattr(store, "skipped", ())  # in the verdict's warnings, and so in its banner
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
