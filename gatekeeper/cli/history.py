"""``gatekeeper history``: what the history store remembers.

``changes`` lists the change points of every recorded metric with the stack difference at each;
``anchor`` shows the anchors set, or sets one (``--set RUN --by NAME --reason TEXT``); ``export`` and
``import`` move records between stores and files (and bring spooled records home); ``platforms`` says
whether the metrics moved between two commits on every platform recorded (the code) or on some (theirs);
``alarms`` replays the baseline gates over the recorded history: how often each fails with nothing changed."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatekeeper.cli import terminal
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["add_parser"]


def _changes(args: argparse.Namespace) -> int:
    from gatekeeper.history.views import changes_report

    text, skipped = changes_report(
        history=args.history, metric=args.metric, channel=args.channel, since=args.since, fmt=args.format
    )
    terminal.warnings(skipped)
    print(text, end="")
    return ExitCode.PASS


def _platforms(args: argparse.Namespace) -> int:
    from gatekeeper.history.views import platforms_report

    text, skipped = platforms_report(
        history=args.history,
        commit=args.commit,
        base=args.base,
        metric=args.metric,
        channel=args.channel,
        min_effect=args.min_effect,
        fmt=args.format,
    )
    terminal.warnings(skipped)
    print(text, end="")
    return ExitCode.PASS


def _alarms(args: argparse.Namespace) -> int:
    from gatekeeper.evaluate.replay import alarms_report

    text, skipped = alarms_report(
        history=args.history, gates_path=args.gates, channel=args.channel, limit=args.limit, fmt=args.format
    )
    terminal.warnings(skipped)
    print(text, end="")
    return ExitCode.PASS


def _anchor(args: argparse.Namespace) -> int:
    from gatekeeper.history.views import anchors_report, set_anchor

    if args.set:
        print(set_anchor(history=args.history, run=args.set, by=args.by or "", reason=args.reason or ""))
        return ExitCode.PASS
    print(anchors_report(history=args.history, fmt=args.format), end="")
    return ExitCode.PASS


def _export(args: argparse.Namespace) -> int:
    from gatekeeper.history.transfer import export_records, store_name

    done = export_records(args.history, args.out)
    terminal.warnings(done.skipped)
    what = f"{done.records} records and {done.anchors} anchors of {store_name(args.history)}"
    print(f"gatekeeper: wrote {what} to {args.out}")
    return ExitCode.PASS


def _import(args: argparse.Namespace) -> int:
    from gatekeeper.history.transfer import import_records, store_name

    done = import_records(args.source, args.into)
    terminal.warnings(done.skipped)
    print(f"gatekeeper: imported {done.records} records and {done.anchors} anchors into {store_name(args.into)}")
    return ExitCode.PASS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="the history store: change points, anchors, export and import")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    store_help = "history store: sqlite:PATH or postgresql://USER@HOST/DB"

    c = verbs.add_parser("changes", help="change points of every recorded metric, with what changed in the stack")
    c.add_argument("--history", required=True, help=store_help)
    c.add_argument("--metric", help="only this metric: name, stage.name or a glob (latency_ms*)")
    c.add_argument("--channel", choices=["stable", "nightly"], help="only this channel")
    c.add_argument("--since", help="only runs recorded on or after this date (YYYY-MM-DD)")
    c.add_argument("--format", choices=["table", "json", "md"], default="table")
    c.set_defaults(handler=_changes)

    pl = verbs.add_parser(
        "platforms", help="did the metrics move between two commits on every platform (the code) or on some (theirs)"
    )
    pl.add_argument("--history", required=True, help=store_help)
    pl.add_argument("--commit", required=True, help="the commit to judge (at least 7 hex digits)")
    pl.add_argument(
        "--base", help="the commit to judge it against (default: the newest earlier one every platform ran)"
    )
    pl.add_argument("--metric", help="only this metric: name, stage.name or a glob (latency_ms*)")
    pl.add_argument("--channel", choices=["stable", "nightly"], help="only this channel")
    pl.add_argument("--min-effect", type=float, default=0.02, help="the smallest move that counts (default 0.02: 2%%)")
    pl.add_argument("--format", choices=["table", "json", "md"], default="table")
    pl.set_defaults(handler=_platforms)

    al = verbs.add_parser(
        "alarms", help="how often each baseline gate fails between recorded runs with nothing changed: its false alarms"
    )
    al.add_argument("--history", required=True, help=store_help)
    al.add_argument("--gates", help="the gates file to replay (default: ./gates.yaml, else the built-in gates)")
    al.add_argument("--channel", choices=["stable", "nightly"], help="only this channel")
    al.add_argument("--limit", type=int, default=200, help="the newest runs of each stage to read (default 200)")
    al.add_argument("--format", choices=["table", "json", "md"], default="table")
    al.set_defaults(handler=_alarms)

    a = verbs.add_parser("anchor", help="show the anchors set, or set one (--set RUN --by NAME --reason TEXT)")
    a.add_argument("--history", required=True, help=store_help)
    a.add_argument("--set", metavar="RUN", help="pipeline id, or record id (sqlite:N) of the run to anchor on")
    a.add_argument("--by", metavar="NAME", help="who sets it (required with --set)")
    a.add_argument("--reason", metavar="TEXT", help="why (required with --set)")
    a.add_argument("--format", choices=["table", "json"], default="table")
    a.set_defaults(handler=_anchor)

    e = verbs.add_parser("export", help="every record and anchor of a store as JSON Lines")
    e.add_argument("--history", required=True, help=store_help)
    e.add_argument("--out", type=Path, required=True, help="the .jsonl file to write")
    e.set_defaults(handler=_export)

    i = verbs.add_parser("import", help="records from an export, a spool file or another store into a store")
    i.add_argument("--from", dest="source", required=True, help="a .jsonl file (export or spool) or a store")
    i.add_argument("--into", required=True, help=f"{store_help} (created when it does not exist)")
    i.set_defaults(handler=_import)
