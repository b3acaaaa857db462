"""``gatekeeper doctor``, ``analyze`` and ``notify``: arguments and dispatch only."""

from __future__ import annotations

import argparse

from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["add_parsers"]


def _cmd_doctor(args: argparse.Namespace) -> int:
    from gatekeeper.machine.doctor import run_doctor

    return run_doctor(capture=args.capture, from_dir=args.from_dir, output_format=args.format, timeout=args.timeout)


def _cmd_analyze(args: argparse.Namespace) -> int:
    from gatekeeper.analyze import analyze

    analyze(
        logs=args.logs,
        artifacts=args.artifacts,
        known_issues=args.known_issues,
        fmt=args.format,
        out=args.out,
        bundle=args.bundle,
        gates=args.gates,
        use_model=not args.no_model,
    )
    return ExitCode.PASS  # a diagnosis of any category is a success of the analysis


def _cmd_notify_slack(args: argparse.Namespace) -> int:
    from gatekeeper.notify import notify_slack

    return notify_slack(
        verdict=args.verdict,
        analysis=args.analysis,
        state=args.state,
        spool_dir=args.spool,
        channel=args.channel,
        repeat_after_h=args.repeat_after,
        timeout=args.timeout,
    )


def _cmd_notify_gitlab(args: argparse.Namespace) -> int:
    from gatekeeper.notify import notify_gitlab

    return notify_gitlab(verdict=args.verdict, analysis=args.analysis, spool_dir=args.spool, timeout=args.timeout)


def _cmd_notify_resend(args: argparse.Namespace) -> int:
    from gatekeeper.notify import resend

    if not args.resend:
        raise InputError(None, "notify", "nothing to do", "use notify slack, notify gitlab or notify --resend")
    return resend(spool_dir=args.resend_spool, timeout=args.timeout)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check this machine's GPU stack (or a capture): what is installed, what will fail, what to do",
        epilog="Exit codes: 0 no error finding, 1 an error finding (something will fail), 2 bad input.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--capture", metavar="DIR", help="also save the raw tool outputs to DIR")
    where.add_argument("--from", dest="from_dir", metavar="DIR", help="diagnose a capture instead of this machine")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per tool (rocm-smi can hang); default 20")
    p.set_defaults(handler=_cmd_doctor)

    p = sub.add_parser("analyze", help="classify a failed job's logs: category, known issue, remediation")
    p.add_argument("logs", nargs="*", help="log files (gzip ok; - for stdin; default: --artifacts/*.log, else stdin)")
    p.add_argument("--artifacts", help="stage artifacts directory: environment and failed checks are evidence too")
    p.add_argument("--known-issues", help="the repository's known-issues.yaml (added to the built-in signatures)")
    p.add_argument("--format", choices=["json", "md", "text"], default="text")
    p.add_argument("--out", help="write the diagnosis here (atomically) instead of stdout")
    p.add_argument("--bundle", help="for an unknown failure, write a reproduction bundle into this directory")
    p.add_argument("--gates", help="gates.yaml: check the waivers known issues name, report the matching waiver")
    p.add_argument(
        "--no-model", action="store_true", help="signatures only: no learned second opinion when none matches"
    )
    p.set_defaults(handler=_cmd_analyze)

    p = sub.add_parser(
        "notify",
        help="Slack alert, MR note and commit status for a verdict (never changes the exit code)",
        epilog="Exit codes: 0 (also when sending failed: the message is spooled), 2 bad input.",
    )
    p.add_argument("--resend", action="store_true", help="send the spooled messages in SPOOL/pending/")
    p.add_argument("--spool", dest="resend_spool", default="alerts", metavar="DIR", help="default: alerts")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per HTTP request (default 10)")
    p.set_defaults(handler=_cmd_notify_resend)
    nsub = p.add_subparsers(dest="target", metavar="TARGET")
    for name, handler, help_text in (
        ("slack", _cmd_notify_slack, "Block Kit alert via SLACK_WEBHOOK_URL or SLACK_BOT_TOKEN + --channel"),
        ("gitlab", _cmd_notify_gitlab, "MR note (updated in place) and commit status; needs GATEKEEPER_GITLAB_TOKEN"),
    ):
        q = nsub.add_parser(name, help=help_text)
        q.add_argument("--verdict", required=True, help="verdict.json from gatekeeper evaluate")
        q.add_argument("--analysis", help="analysis.json from gatekeeper analyze --format json")
        q.add_argument("--spool", default="alerts", metavar="DIR", help="undelivered messages go to DIR/pending/")
        q.add_argument("--timeout", type=float, default=10.0, help="seconds per HTTP request (default 10)")
        q.set_defaults(handler=handler)
        if name == "slack":
            q.add_argument("--state", help="alert state file (no storms: alert on start, recovery, repeat)")
            q.add_argument("--channel", help="channel for SLACK_BOT_TOKEN (default: $SLACK_CHANNEL)")
            q.add_argument("--repeat-after", type=float, default=24.0, metavar="HOURS", help="default 24")
