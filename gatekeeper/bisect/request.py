"""What a bisection is asked to do: its options, their checks, and the request bisect.json records.

``BisectOptions`` are the options as the CLI passes them; ``validate`` refuses
a request that cannot run (one line, exit 2, before anything runs);
``load_gates`` reads the gates a ``--stage`` bisection judges by and builds
its judge; ``recorded_request`` is bisect.json's ``request`` object, which a
``--resume`` must match key for key.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatekeeper.bisect.decide import StageJudge, select_gates
from gatekeeper.contract.stage_names import STAGE_NAMES
from gatekeeper.core import budgets, files
from gatekeeper.core.errors import InputError

__all__ = ["BisectOptions", "channel", "load_gates", "recorded_request", "stage_args", "validate"]


@dataclass(frozen=True)
class BisectOptions:
    provider: str
    good: str
    bad: str
    out: Path
    stage: str | None = None
    stage_args: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    metric: str | None = None
    channel: str | None = None
    gates: Path | None = None
    max_processes: int = 15
    timeout: float = 3600.0
    resume: bool = False
    provider_options: Mapping[str, str | None] = field(default_factory=dict)
    repo: Path = Path(".")
    bundle: bool = True


def stage_args(opts: BisectOptions) -> list[str]:
    """The arguments each stage run gets: ``--stage-args``, plus ``--channel`` when given and not among them."""
    args = list(opts.stage_args)
    if opts.stage and opts.channel and "--channel" not in args:
        args += ["--channel", opts.channel]
    return args


def channel(opts: BisectOptions) -> str:
    """The channel whose gates judge: ``--channel``, else ``$GATEKEEPER_CHANNEL``, else stable."""
    return opts.channel or os.environ.get("GATEKEEPER_CHANNEL") or "stable"


def recorded_request(
    opts: BisectOptions, provider_options: Mapping[str, Any], gates_file: str | None, gates_sha: str | None
) -> dict[str, Any]:
    """bisect.json's ``request``: everything a ``--resume`` must ask again to continue this bisection."""
    o = opts
    return {
        "provider": o.provider,
        "good": o.good,
        "bad": o.bad,
        "mode": "stage" if o.stage else "command",
        "stage": o.stage,
        "stage_args": list(o.stage_args),
        "command": list(o.command),
        "metric": o.metric,
        "channel": o.channel,
        "gates_file": gates_file,
        "gates_sha256": gates_sha,
        "max_processes": o.max_processes,
        "timeout_s": float(o.timeout),
        "options": dict(provider_options.items()),
    }


def validate(opts: BisectOptions) -> None:
    """Refuse options that cannot make a bisection (``InputError``: one line naming the option and the fix)."""
    o = opts
    if o.stage and o.command:
        raise InputError(None, "--stage", "give either --stage or -- COMMAND, not both", "drop one")
    if not o.stage and not o.command:
        raise InputError(None, "--stage", "nothing to run", "give --stage NAME or -- COMMAND after the options")
    if o.stage and o.stage not in STAGE_NAMES:
        raise InputError(None, "--stage", f"{o.stage!r} is not a stage", f"use one of {', '.join(STAGE_NAMES)}")
    if o.metric and not o.stage:
        raise InputError(None, "--metric", "a metric is judged in --stage mode only", "drop --metric, or use --stage")
    if o.max_processes < 1:
        raise InputError(
            None, "--max-processes", f"must be at least 1 (got {o.max_processes})", "pass --max-processes 1 or more"
        )
    if o.timeout <= 0:
        raise InputError(
            None, "--timeout", f"must be positive (got {o.timeout})", "pass a positive --timeout in seconds"
        )


def load_gates(opts: BisectOptions) -> tuple[str | None, str | None, StageJudge | None]:
    """The gates file, its sha256 and the judge built from its gates; all None in command mode."""
    if not opts.stage:
        return None, None, None
    from gatekeeper.evaluate.gates import default_gates_path, load_gates_text

    path = default_gates_path(opts.gates)
    text = files.read_text(path, what="gates file", max_bytes=budgets.MAX_YAML_BYTES)
    gates = select_gates(load_gates_text(text, str(path)), stage=opts.stage, metric=opts.metric, channel=channel(opts))
    judge = StageJudge(gates, stage=opts.stage, channel=channel(opts), labels=[], max_processes=opts.max_processes)
    return str(path), hashlib.sha256(text.encode()).hexdigest(), judge
