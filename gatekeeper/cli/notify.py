"""``gatekeeper notify``: Slack alert, MR note and commit status; never changes the exit code."""

from __future__ import annotations

import argparse

from gatekeeper.cli import terminal
from gatekeeper.core.errors import InputError

__all__ = ["add_parser"]


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
        log=terminal.err,
    )


def _cmd_notify_gitlab(args: argparse.Namespace) -> int:
    from gatekeeper.notify import notify_gitlab

    return notify_gitlab(
        verdict=args.verdict, analysis=args.analysis, spool_dir=args.spool, timeout=args.timeout, log=terminal.err
    )


def _cmd_notify_issue(args: argparse.Namespace) -> int:
    from gatekeeper.notify.issue import notify_issue

    return notify_issue(
        bisect=args.bisect,
        verdict=args.verdict,
        project=args.project,
        bundle_url=args.bundle_url,
        spool_dir=args.spool,
        timeout=args.timeout,
        log=terminal.err,
    )


def _cmd_notify_resend(args: argparse.Namespace) -> int:
    from gatekeeper.notify import resend

    if not args.resend:
        raise InputError(None, "notify", "nothing to do", "use notify slack, notify gitlab or notify --resend")
    return resend(spool_dir=args.resend_spool, timeout=args.timeout, log=terminal.err)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "notify",
        help="Slack alert, MR note and commit status for a verdict (never changes the exit code)",
        epilog="Exit codes: 0 (also when sending failed: the message is spooled), 2 bad input (also a verdict "
        "of another pipeline, commit or merge request than this job's).",
    )
    p.add_argument(
        "--resend",
        action="store_true",
        help="send the spooled messages in SPOOL/pending/ that are signed with $GATEKEEPER_SPOOL_KEY, to this "
        "job's project only (without the key nothing is sent)",
    )
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
    q = nsub.add_parser(
        "issue",
        help="one GitLab issue per regression signature: filed from a bisection, commented, closed on recovery",
    )
    q.add_argument("--bisect", help="bisect.json of a finished gatekeeper bisect: create or update its issue")
    q.add_argument("--verdict", help="a verdict.json: comment on (still failing) or close (recovered) open issues")
    q.add_argument("--project", help="the GitLab project (default: the job's CI_PROJECT_ID)")
    q.add_argument("--bundle-url", help="link to the repro bundle (default: the job's artifacts, from CI_JOB_URL)")
    q.add_argument("--spool", default="alerts", metavar="DIR", help="undelivered messages go to DIR/pending/")
    q.add_argument("--timeout", type=float, default=10.0, help="seconds per HTTP request (default 10)")
    q.set_defaults(handler=_cmd_notify_issue)
