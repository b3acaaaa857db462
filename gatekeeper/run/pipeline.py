"""``gatekeeper pipeline``: every stage in its own process, then evaluate.

A stage that crashes or runs past its timeout leaves an ``error`` artifact
written here, so the gates see it (and its missing metrics) instead of a gap.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gatekeeper.contract.failures import crash_category
from gatekeeper.contract.stage_report import Check, Environment, StageReport, utc_now, write_stage
from gatekeeper.contract.verdict import Verdict
from gatekeeper.core import proc
from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import shell_join
from gatekeeper.evaluate.gates import load_gates
from gatekeeper.evaluate.run import run_evaluate

__all__ = ["PipelineOptions", "run_pipeline"]

# Reduced settings for --quick (a smoke run of the whole flow in a few minutes on a CPU).
QUICK_ARGS: dict[str, list[str]] = {
    "functional_test": ["--seeds", "2", "--checkpoint-trials", "2"],
    "performance_baseline": ["--processes", "3", "--iterations", "20", "--max-processes", "6"],
    "compatibility_check": ["--collective-max-mb", "4", "--bandwidth-sizes", "1,4"],
}


@dataclass(frozen=True)
class PipelineOptions:
    out: Path = Path("artifacts")
    gates: Path = Path("gates.yaml")
    device: str = "auto"
    channel: str | None = None
    model: str | None = None
    baseline: str | None = None
    record: str | None = None
    stages: tuple[str, ...] = ()  # empty: all
    stage_args: Mapping[str, Sequence[str]] = field(default_factory=dict)
    stage_timeout: float = 3600.0
    quick: bool = False


Log = Callable[[str], None]


def run_pipeline(
    options: PipelineOptions, environ: Mapping[str, str] | None = None, log: Log = lambda _line: None
) -> Verdict:
    """Every selected stage in its own process, then evaluate. ``log`` gets a heading before each step (the
    CLI passes the terminal writer, so the heading comes before the stage's own output); nothing here prints."""
    from stages import STAGES

    env = dict(os.environ if environ is None else environ)
    unknown = [s for s in options.stages if s not in STAGES]
    if unknown:
        raise InputError(None, "--stages", f"unknown stage(s): {', '.join(unknown)}", f"available: {', '.join(STAGES)}")
    for name in options.stage_args:
        if name not in STAGES:
            raise InputError(None, "--stage-arg", f"unknown stage {name!r}", f"available: {', '.join(STAGES)}")
    if not options.gates.is_file():
        raise InputError(options.gates, "", "gates file not found", "pass --gates PATH (the default is ./gates.yaml)")
    load_gates(options.gates)  # a gates file evaluate would refuse is refused now, not after every stage ran
    selected = [s for s in STAGES if not options.stages or s in options.stages]
    # One channel for the whole run, given to every stage and to evaluate (which never takes it from artifacts).
    options = replace(options, channel=job_channel(options.channel, env))
    try:
        options.out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as err:
        raise InputError(
            options.out, "", f"--out is not a directory ({err.strerror}: a file has this name or a name above it)",
            "pass --out a directory path (it is created when missing)",
        ) from None  # fmt: skip
    for name in selected:
        run_stage_process(name, options, env, log)
    log(f"\n== gatekeeper evaluate ({len(selected)} stages)")
    return run_evaluate(
        artifacts=options.out,
        gates_path=options.gates,
        out=options.out,
        baseline=options.baseline,
        channel=options.channel,
        environ=env,
        not_selected=frozenset(STAGES) - set(selected),
        record=options.record,
        log=log,
    )


def job_channel(explicit: str | None, environ: Mapping[str, str]) -> str:
    """--channel, else $GATEKEEPER_CHANNEL, else what the stages would pick (nightly for a .dev torch)."""
    from importlib import metadata

    from stages.device import resolve_channel

    try:
        torch_version: str | None = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = None
    return resolve_channel(explicit or environ.get("GATEKEEPER_CHANNEL") or None, torch_version)


def stage_argv(name: str, options: PipelineOptions) -> list[str]:
    argv = [sys.executable, "-m", f"stages.{name}", "--device", options.device, "--out", str(options.out)]
    if options.channel:
        argv += ["--channel", options.channel]
    if options.model:
        argv += ["--model", options.model]
    if options.baseline and name == "performance_baseline":  # sequential sampling against the same baseline
        argv += ["--baseline", options.baseline]
    if options.quick:
        argv += QUICK_ARGS.get(name, [])
    argv += list(options.stage_args.get(name, ()))
    return argv


def run_stage_process(
    name: str, options: PipelineOptions, environ: Mapping[str, str], log: Log = lambda _line: None
) -> int | None:
    argv = stage_argv(name, options)
    log(f"\n== gatekeeper stage {name}: {shell_join(argv[1:])}")
    artifact = options.out / f"{name}.json"
    before = artifact.stat().st_mtime_ns if artifact.exists() else None
    result = proc.run_passthrough(argv, timeout=options.stage_timeout, env=environ)
    after = artifact.stat().st_mtime_ns if artifact.exists() else None
    if result.returncode == 2:
        raise InputError(
            None, f"stage {name}", "the stage rejected its arguments (its gatekeeper: line above names the option)",
            "fix that option: --device, --model or --quick of this command, or a --stage-arg",
        )  # fmt: skip
    if after is None or after == before:
        write_stage(_crashed_report(name, result, options), options.out)
    return result.returncode


def _crashed_report(name: str, result: proc.ProcResult, options: PipelineOptions) -> StageReport:
    env = Environment(
        torch_version=None,
        python=platform.python_version(),
        host=socket.gethostname(),
        channel=options.channel or "stable",  # type: ignore[arg-type]
    )
    message = f"the stage process {result.describe()} before writing {name}.json; see {name}.log"
    if result.timed_out:
        category = "gpu_hang_or_timeout"  # past --stage-timeout
    elif result.returncode is not None and result.returncode < 0:
        category = crash_category(message)  # killed by a signal
    else:
        category = "configuration_error"  # it exited without its artifact: it never got to run its checks
    return StageReport(
        stage=name,
        status="error",
        started_at=utc_now(),
        duration_s=result.duration_s,
        environment=env,
        checks=(Check("stage", "error", message, result.duration_s, category=category),),
    )
