"""``gatekeeper breaker``: check, record, reset, status. Each prints one clear line and returns an exit code."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from gatekeeper.breaker.markers import diagnosis_from_artifacts, open_markers, upstream_failure, write_marker
from gatekeeper.breaker.policy import static_policy
from gatekeeper.breaker.state import BreakerConfig, check, parse_duration, record, reset, state_dir, status
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["add_parser", "check_command", "record_command", "reset_command", "status_command"]


def _stdout(out: TextIO | None) -> TextIO:
    # Resolved at call time, not bound as a default, so a redirected sys.stdout is honoured.
    return out if out is not None else sys.stdout


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
    out: TextIO | None = None,
) -> int:
    policy = static_policy(environ, channel, protected_branch)
    if not policy.allowed:
        print(f"gatekeeper: breaker: {policy.message}", file=sys.stderr)
        return ExitCode.BLOCKED
    _stdout(out).write(f"gatekeeper: breaker: {policy.message}\n")
    never_skip = policy.never_skips(channel)
    # A job after one the breaker skipped is skipped too: the chain of stages
    # (and the gate, which would only see missing data) stops without device time.
    upstream, warnings = open_markers(Path(artifacts), job, channel, environ) if artifacts else ([], [])
    for warning in warnings:
        print(f"gatekeeper: breaker: warning: {warning}", file=sys.stderr)
    if upstream and never_skip:
        print(
            f"gatekeeper: breaker: upstream {upstream[0]}; ignored: on a tag, the protected branch or a merge "
            "request into it the breaker never skips the stable channel",
            file=sys.stderr,
        )
    elif upstream:
        print(f"gatekeeper: breaker: skipped: upstream {upstream[0]}", file=sys.stderr)
        write_marker(artifacts, channel, job, f"skipped after upstream {upstream[0]}", environ)
        return ExitCode.BREAKER_OPEN
    upstream_failed = upstream_failure(Path(artifacts or "."), after)
    if upstream_failed:
        print(
            f"gatekeeper: breaker: skipped: upstream {upstream_failed} on this channel; no device time spent",
            file=sys.stderr,
        )
        return ExitCode.BREAKER_OPEN
    if policy_only:
        return ExitCode.PASS
    decision = check(state_dir(state, environ), channel, job, _config(failures, cooldown))
    if not decision.allowed and never_skip:
        _stdout(out).write(
            f"gatekeeper: breaker: {decision.message.split('; skipped without')[0]}; running anyway: on a tag, the "
            "protected branch or a merge request into it the breaker never skips the stable channel (the gate "
            "must decide); the result is still recorded\n"
        )
        return ExitCode.PASS
    if not decision.allowed:
        print(f"gatekeeper: breaker: {decision.message}", file=sys.stderr)
        write_marker(artifacts, channel, job, decision.message, environ)
        return ExitCode.BREAKER_OPEN
    _stdout(out).write(f"gatekeeper: breaker: {decision.message}\n")
    return ExitCode.PASS


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
    out: TextIO | None = None,
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
    _stdout(out).write(
        f"gatekeeper: breaker: {channel}/{job} recorded {'pass' if passed else 'fail'}: now {st.state}"
        f" ({st.consecutive_failures} consecutive failure(s))\n"
    )
    return ExitCode.PASS


def reset_command(
    *,
    channel: str,
    job: str,
    by: str,
    reason: str,
    state: str | None = None,
    environ: Mapping[str, str],
    out: TextIO | None = None,
) -> int:
    st = reset(state_dir(state, environ), channel, job, by=by, reason=reason)
    _stdout(out).write(f"gatekeeper: breaker: {channel}/{job} reset to {st.state} by {by}: {reason}\n")
    return ExitCode.PASS


def status_command(
    *, as_json: bool = False, state: str | None = None, environ: Mapping[str, str], out: TextIO | None = None
) -> int:
    directory = state_dir(state, environ)
    states = status(directory)
    if as_json:
        _stdout(out).write(json.dumps([s.to_dict() for s in states], indent=2) + "\n")
        return ExitCode.PASS
    if not states:
        _stdout(out).write(f"no breaker state in {directory} (every breaker closed)\n")
    for s in states:
        since = f" since {s.opened_at}" if s.opened_at else ""
        diag = f"; last diagnosis: {s.last_diagnosis}" if s.last_diagnosis else ""
        _stdout(out).write(
            f"{s.channel}/{s.job}: {s.state}{since}, {s.consecutive_failures} consecutive failure(s){diag}\n"
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
    check.add_argument("--protected-branch", help="default $CI_DEFAULT_BRANCH or main")
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
