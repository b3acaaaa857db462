"""``gatekeeper breaker``: check, record, reset, status. Each shows clear lines through the terminal writer
(``cli/terminal.py``) and returns an exit code; the check's decision is ``gatekeeper.breaker.gate.check_job``."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gatekeeper.breaker.gate import check_job
from gatekeeper.breaker.markers import diagnosis_from_artifacts
from gatekeeper.breaker.state import BreakerConfig, parse_duration, record, reset, state_dir, status
from gatekeeper.cli import terminal
from gatekeeper.core import escape
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["add_parser", "check_command", "record_command", "reset_command", "status_command"]


def _config(failures: int, cooldown: str) -> BreakerConfig:
    return BreakerConfig(failures=failures, cooldown_s=parse_duration(cooldown))


def check_command(
    *,
    channel: str,
    job: str,
    failures: int,
    cooldown: str,
    policy_only: bool = False,
    protected_branch: str | None = None,
    state: str | None = None,
    artifacts: str | None = None,
    after: Sequence[str] = (),
    environ: Mapping[str, str],
) -> int:
    outcome = check_job(
        channel=channel,
        job=job,
        config=_config(failures, cooldown),
        environ=environ,
        policy_only=policy_only,
        protected_branch=protected_branch,
        state=state,
        artifacts=artifacts,
        after=after,
    )
    for line in outcome.lines:
        (terminal.err if line.error else terminal.out)(line.text)
    return outcome.exit_code


def record_command(
    *,
    channel: str,
    job: str,
    failures: int,
    cooldown: str,
    result: str | None = None,
    exit_code: int | None = None,
    diagnosis: str | None = None,
    artifacts: str | None = None,
    job_url: str | None = None,
    state: str | None = None,
    environ: Mapping[str, str],
) -> int:
    if (result is None) == (exit_code is None):
        raise InputError(None, "breaker record", "give exactly one of --result and --exit-code", "--result pass|fail")
    # A stage that passed with warnings (3) passed; anything else that is not 0 is a failure.
    passed = result == "pass" if result is not None else exit_code in (ExitCode.PASS, ExitCode.WARN)
    if not passed and diagnosis is None and artifacts:
        diagnosis = diagnosis_from_artifacts(Path(artifacts), job)
    if not passed and diagnosis is None and exit_code is not None:
        diagnosis = f"{job} exited {exit_code}"
    st = record(
        state_dir(state, environ),
        channel,
        job,
        _config(failures, cooldown),
        passed=passed,
        diagnosis=diagnosis,
        job_url=job_url or None,
    )
    terminal.out(
        f"gatekeeper: breaker: {channel}/{job} recorded {'pass' if passed else 'fail'}: now {st.state}"
        f" ({st.consecutive_failures} consecutive failure(s))"
    )
    return ExitCode.PASS


def reset_command(
    *, channel: str, job: str, by: str, reason: str, state: str | None = None, environ: Mapping[str, str]
) -> int:
    st = reset(state_dir(state, environ), channel, job, by=by, reason=reason)
    terminal.out(f"gatekeeper: breaker: {channel}/{job} reset to {st.state} by {by}: {reason}")
    return ExitCode.PASS


def status_command(*, as_json: bool = False, state: str | None = None, environ: Mapping[str, str]) -> int:
    directory = state_dir(state, environ)
    states = status(directory)
    if as_json:
        terminal.out_json([s.to_dict() for s in states])
        return ExitCode.PASS
    if not states:
        terminal.out(f"no breaker state in {directory} (every breaker closed)")
    for s in states:
        since = f" since {s.opened_at}" if s.opened_at else ""
        diag = f"; last diagnosis: {s.last_diagnosis}" if s.last_diagnosis else ""
        # one line per breaker: a newline in a recorded diagnosis would forge the next breaker's line
        terminal.out(
            escape.terminal(
                f"{s.channel}/{s.job}: {s.state}{since}, {s.consecutive_failures} consecutive failure(s){diag}",
                newlines=False,
            )
        )
    return ExitCode.PASS


# --- the command line: arguments and dispatch ---


def _run(args: argparse.Namespace) -> int:
    # The arguments every action shares, by the parent parsers below that declare them.
    shared: dict[str, Any] = {"state": args.state, "environ": os.environ}
    if args.action == "status":
        return status_command(as_json=args.json, **shared)
    shared |= {"channel": args.channel, "job": args.job}
    if args.action == "reset":
        return reset_command(by=args.by, reason=args.reason, **shared)
    shared |= {"failures": args.failures, "cooldown": args.cooldown}
    if args.action == "check":
        return check_command(
            policy_only=args.policy_only,
            protected_branch=args.protected_branch,
            artifacts=args.artifacts,
            after=args.after,
            **shared,
        )
    return record_command(
        result=args.result,
        exit_code=args.exit_code,
        diagnosis=args.diagnosis,
        artifacts=args.artifacts,
        job_url=args.job_url,
        **shared,
    )


def _parents() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    """The shared arguments, declared once: every action's --state; the breaker's --channel and --job
    (all but status); its thresholds --failures and --cooldown (check and record)."""
    state, target, limits = (argparse.ArgumentParser(add_help=False) for _ in range(3))
    state.add_argument("--state", help="state directory (default $GATEKEEPER_BREAKER_DIR or <cache root>/breaker)")
    target.add_argument("--channel", required=True, help="stable or nightly")
    target.add_argument("--job", required=True, help="stage or job name")
    limits.add_argument("--failures", type=int, default=3, help="consecutive failures that open it (default 3)")
    limits.add_argument("--cooldown", default="24h", help="wait before a probe run (default 24h)")
    return state, target, limits


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("breaker", help="circuit breakers: static policy and per channel/job state")
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    state, target, limits = _parents()
    check = acts.add_parser(
        "check", help="exit 1 on a policy violation, 4 while the breaker is open", parents=[state, target, limits]
    )
    check.add_argument("--policy-only", action="store_true", help="only the static pipeline policy")
    check.add_argument(
        "--protected-branch", help="default $GATEKEEPER_PROTECTED_BRANCH, else $CI_DEFAULT_BRANCH, else main"
    )
    check.add_argument(
        "--artifacts", help="artifacts dir: an upstream job skipped by a breaker skips this one; open: leave a marker"
    )
    check.add_argument(
        "--after", action="append", default=[], metavar="STAGE", help="skip (exit 4) unless STAGE passed in --artifacts"
    )
    rec = acts.add_parser("record", help="record a job's result", parents=[state, target, limits])
    rec.add_argument("--result", choices=["pass", "fail"])
    rec.add_argument("--exit-code", type=int, help="the stage's exit code (0 and 3 pass)")
    rec.add_argument("--diagnosis", help="one line saved as the last diagnosis")
    rec.add_argument("--artifacts", help="artifacts dir: the diagnosis is read from <job>.json")
    rec.add_argument("--job-url", help="link shown while the breaker is open")
    reset = acts.add_parser("reset", help="close a breaker by hand (logged)", parents=[state, target])
    reset.add_argument("--by", required=True, help="who resets it")
    reset.add_argument("--reason", required=True, help="why")
    status = acts.add_parser("status", help="show every breaker", parents=[state])
    status.add_argument("--json", action="store_true")
    p.set_defaults(handler=_run)
