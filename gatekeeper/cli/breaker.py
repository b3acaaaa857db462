"""``gatekeeper breaker``: check, record, reset, status. Each prints one clear line and returns an exit code."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from gatekeeper.breaker.state import (
    BreakerConfig,
    check,
    parse_duration,
    record,
    reset,
    state_dir,
    static_policy,
    status,
)
from gatekeeper.contract.stage_report import read_stage
from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["check_command", "diagnosis_from_artifacts", "record_command", "reset_command", "status_command"]


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
    # A job after one the breaker skipped is skipped too: the chain of stages
    # (and the gate, which would only see missing data) stops without device time.
    upstream = _open_markers(Path(artifacts), job) if artifacts else []
    if upstream:
        print(f"gatekeeper: breaker: skipped: upstream {upstream[0]}", file=sys.stderr)
        _write_marker(artifacts, channel, job, f"skipped after upstream {upstream[0]}")
        return ExitCode.BREAKER_OPEN
    upstream_failed = _upstream_failure(Path(artifacts or "."), after)
    if upstream_failed:
        print(
            f"gatekeeper: breaker: skipped: upstream {upstream_failed} on this channel; no device time spent",
            file=sys.stderr,
        )
        return ExitCode.BREAKER_OPEN
    if policy_only:
        return ExitCode.PASS
    decision = check(state_dir(state, environ), channel, job, _config(failures, cooldown))
    if not decision.allowed:
        print(f"gatekeeper: breaker: {decision.message}", file=sys.stderr)
        _write_marker(artifacts, channel, job, decision.message)
        return ExitCode.BREAKER_OPEN
    _stdout(out).write(f"gatekeeper: breaker: {decision.message}\n")
    return ExitCode.PASS


MARKER_SUFFIX = ".breaker.json"


def _upstream_failure(artifacts: Path, after: Sequence[str]) -> str | None:
    """Why a stage this job comes after did not pass on this channel (None: it passed).

    Stage jobs of both channels share one needs: chain (GitLab < 18.6 cannot
    say "the same matrix value" in needs:), so they run `when: always` and
    decide here, from their own channel's artifacts, whether to go on.
    """
    for stage in after:
        path = artifacts / f"{_file_stem(stage)}.json"
        if not path.is_file():
            return f"{stage} wrote no report"
        try:
            report = read_stage(path)
        except InputError as err:
            return f"{stage} report unreadable ({err.line()})"
        if report.status in ("failed", "error"):
            counts = report.counts()
            return f"{stage} {report.status} ({counts['failed']} failed, {counts['error']} errors)"
    return None


def _file_stem(job: str) -> str:
    """A job name as one file name inside the artifacts: "../x" or "a/b" cannot leave the directory."""
    return _UNSAFE.sub("_", job).lstrip(".") or "_"


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _write_marker(artifacts: str | None, channel: str, job: str, message: str) -> None:
    if artifacts:
        files.write_json(
            Path(artifacts) / f"{_file_stem(job)}{MARKER_SUFFIX}",
            {"schema": "gatekeeper.breaker-skip/v1", "channel": channel, "job": job, "message": message},
        )


def _open_markers(artifacts: Path, job: str) -> list[str]:
    found = []
    for path in sorted(artifacts.glob(f"*{MARKER_SUFFIX}")):
        if path.name == f"{_file_stem(job)}{MARKER_SUFFIX}":
            continue  # our own marker from an earlier attempt of this job
        doc = files.read_json(path, what="breaker marker")
        if isinstance(doc, dict) and doc.get("message"):
            found.append(f"{doc.get('job', path.name)}: {doc['message']}")
    return found


def diagnosis_from_artifacts(artifacts: Path, job: str) -> str | None:
    """The failed checks of the job's stage report, as one short line."""
    path = artifacts / f"{_file_stem(job)}.json"
    if not path.is_file():
        return f"{job} wrote no report (crashed or timed out before writing {path.name})"
    try:
        report = read_stage(path)
    except InputError as err:
        return f"unreadable stage report: {err.line()}"
    bad = [c for c in report.checks if c.status in ("failed", "error")]
    if not bad:
        return None
    first = "; ".join(f"{c.name}: {c.message}" for c in bad[:2])
    more = f" (+{len(bad) - 2} more)" if len(bad) > 2 else ""
    return (first + more)[:300]


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
    import os

    env, common = os.environ, {"state": args.state}
    if args.action == "check":
        return check_command(
            channel=args.channel,
            job=args.job,
            failures=args.failures,
            cooldown=args.cooldown,
            policy_only=args.policy_only,
            protected_branch=args.protected_branch,
            artifacts=args.artifacts,
            after=args.after,
            environ=env,
            **common,
        )
    if args.action == "record":
        return record_command(
            channel=args.channel,
            job=args.job,
            failures=args.failures,
            cooldown=args.cooldown,
            result=args.result,
            exit_code=args.exit_code,
            diagnosis=args.diagnosis,
            artifacts=args.artifacts,
            job_url=args.job_url,
            environ=env,
            **common,
        )
    if args.action == "reset":
        return reset_command(channel=args.channel, job=args.job, by=args.by, reason=args.reason, environ=env, **common)
    return status_command(as_json=args.json, environ=env, **common)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("breaker", help="circuit breakers: static policy and per channel/job state")
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in (
        ("check", "exit 1 on a policy violation, 4 while the breaker is open"),
        ("record", "record a job's result"),
        ("reset", "close a breaker by hand (logged)"),
        ("status", "show every breaker"),
    ):
        a = acts.add_parser(name, help=text)
        a.add_argument("--state", help="state directory (default $GATEKEEPER_BREAKER_DIR or <cache root>/breaker)")
        if name == "status":
            a.add_argument("--json", action="store_true")
            continue
        a.add_argument("--channel", required=True, help="stable or nightly")
        a.add_argument("--job", required=True, help="stage or job name")
        if name == "reset":
            a.add_argument("--by", required=True, help="who resets it")
            a.add_argument("--reason", required=True, help="why")
            continue
        a.add_argument("--failures", type=int, default=3, help="consecutive failures that open it (default 3)")
        a.add_argument("--cooldown", default="24h", help="wait before a probe run (default 24h)")
    check = acts.choices["check"]
    check.add_argument("--policy-only", action="store_true", help="only the static pipeline policy")
    check.add_argument("--protected-branch", help="default $CI_DEFAULT_BRANCH or main")
    check.add_argument(
        "--artifacts", help="artifacts dir: an upstream job skipped by a breaker skips this one; open: leave a marker"
    )
    check.add_argument(
        "--after", action="append", default=[], metavar="STAGE", help="skip (exit 4) unless STAGE passed in --artifacts"
    )
    rec = acts.choices["record"]
    rec.add_argument("--result", choices=["pass", "fail"])
    rec.add_argument("--exit-code", type=int, help="the stage's exit code (0 and 3 pass)")
    rec.add_argument("--diagnosis", help="one line saved as the last diagnosis")
    rec.add_argument("--artifacts", help="artifacts dir: the diagnosis is read from <job>.json")
    rec.add_argument("--job-url", help="link shown while the breaker is open")
    p.set_defaults(handler=_run)
