"""``gatekeeper doctor``: this machine's GPU stack (or a capture), checked; ``doctor gitlab``:
does the GitLab project enforce the gate (gatekeeper.machine.gitlab_settings)."""

from __future__ import annotations

import argparse
import os

from gatekeeper.cli import terminal
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    if args.target == "gitlab":
        return _gitlab(args)
    from gatekeeper.machine.doctor import render_json, render_text, run_doctor

    report = run_doctor(capture=args.capture, from_dir=args.from_dir, timeout=args.timeout)
    if args.format == "json":
        terminal.out_json_text(render_json(report))
    else:
        terminal.out(render_text(report), end="")  # device names from a capture: shown with \xNN escapes
    if args.capture is not None and args.format == "text":
        where = args.capture
        terminal.out(f"capture saved to {where} (diagnose it elsewhere: gatekeeper doctor --from {where})")
    return ExitCode.BLOCKED if report.has_errors else ExitCode.PASS


_MARK = {"ok": "ok", "info": "i", "skipped": "-", "warning": "!", "error": "x"}


def _gitlab(args: argparse.Namespace) -> int:
    from gatekeeper.core.gitlab_api import TOKEN_VARIABLE, client_from_env
    from gatekeeper.machine.gitlab_settings import check_project, summary

    if args.capture or args.from_dir:
        raise InputError(None, "doctor gitlab", "--capture/--from are for the machine doctor", "drop them")
    env = dict(os.environ)
    if args.api_url:
        env["CI_API_V4_URL"] = args.api_url
    project = args.project or env.get("CI_PROJECT_ID") or env.get("CI_PROJECT_PATH")
    if not project:
        raise InputError(None, "doctor gitlab", "no project", "give --project GROUP/NAME (or run in a GitLab job)")
    client = client_from_env(env, timeout=(5.0, args.timeout), retries=1)
    if client is None:
        missing = TOKEN_VARIABLE if env.get("CI_API_V4_URL") else "--api-url (or CI_API_V4_URL)"
        raise InputError(
            None, "doctor gitlab", f"{missing} not set",
            f"export {TOKEN_VARIABLE} (a token with read_api, Maintainer role) and give --api-url https://HOST/api/v4",
        )  # fmt: skip
    branch = args.branch or env.get("GATEKEEPER_PROTECTED_BRANCH") or env.get("CI_DEFAULT_BRANCH") or "main"
    findings = check_project(client, project, protected_branch=branch, slack=args.slack)
    if args.format == "json":
        terminal.out_json(
            {"project": str(project), "branch": branch, "findings": [f.to_dict() for f in findings]}, indent=None
        )
    else:
        terminal.out(f"gatekeeper doctor gitlab: {project} (protected branch {branch})")
        for f in findings:
            terminal.out(f"  [{_MARK[f.severity]}] {f.check}: {f.message}")
            if f.remediation and f.is_problem:
                terminal.out(f"         fix: {f.remediation}")
        terminal.out(summary(findings))
    return ExitCode.BLOCKED if any(f.severity == "error" for f in findings) else ExitCode.PASS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check this machine's GPU stack (or a capture), or with `gitlab` the project's GitLab settings",
        epilog="Exit codes: 0 no error finding, 1 an error finding (something will fail), 2 bad input. "
        "doctor gitlab reads GATEKEEPER_GITLAB_TOKEN (read_api, Maintainer role).",
    )
    p.add_argument(
        "target",
        nargs="?",
        choices=["machine", "gitlab"],
        default="machine",
        help="machine (default): this machine's GPU stack; gitlab: does the project enforce the gate",
    )
    gl = p.add_argument_group("doctor gitlab")
    gl.add_argument("--project", help="project ID or path (default $CI_PROJECT_ID)")
    gl.add_argument("--api-url", help="GitLab API, e.g. https://gitlab.example.com/api/v4 (default $CI_API_V4_URL)")
    gl.add_argument(
        "--branch", help="protected branch (default $GATEKEEPER_PROTECTED_BRANCH, else $CI_DEFAULT_BRANCH, else main)"
    )
    gl.add_argument("--slack", action="store_true", help="the component's slack input is on: check its variables")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--capture", metavar="DIR", help="also save the raw tool outputs to DIR")
    where.add_argument("--from", dest="from_dir", metavar="DIR", help="diagnose a capture instead of this machine")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--timeout", type=float, default=20.0, help="seconds per tool (rocm-smi can hang) or HTTP read; default 20"
    )
    p.set_defaults(handler=_run)
