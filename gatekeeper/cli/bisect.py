"""``gatekeeper bisect``: the first bad candidate between a known good and a known bad one.

This module only parses arguments, prints the library's progress events (a live
line on a terminal, GitLab collapsible sections in a CI log) and the final
table, and returns the exit code.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gatekeeper.cli.terminal import warnings, write_controls
from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import terminal

if TYPE_CHECKING:
    from gatekeeper.bisect import BisectOptions

__all__ = ["add_parser"]

_ESC = "\x1b[0K"


class Printer:
    """Progress events on ``stream``: a live line in a terminal, collapsible sections in a GitLab log."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.section: str | None = None
        self.live = False

    def _clear(self) -> None:
        if self.live:
            write_controls(self.stream, "\r" + " " * self._width() + "\r")
            self.live = False

    def _width(self) -> int:
        return max(20, shutil.get_terminal_size((120, 24)).columns - 1)

    def line(self, text: str) -> None:
        self._clear()
        self.stream.write(terminal(text, newlines=False) + "\n")
        self.stream.flush()

    def progress(self, text: str) -> None:
        text = terminal(text, newlines=False)
        if self.tty:
            write_controls(self.stream, "\r" + text[: self._width()].ljust(self._width()))
            self.live = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def open(self, name: str, header: str) -> None:
        self.close()
        header = terminal(header, newlines=False)
        if self.tty:
            return
        sid = "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in name)[:60] or "candidate"
        write_controls(
            self.stream, f"{_ESC}section_start:{int(time.time())}:bisect_{sid}[collapsed=true]\r{_ESC}{header}\n"
        )
        self.section = sid

    def close(self) -> None:
        if self.section is not None and not self.tty:
            write_controls(self.stream, f"{_ESC}section_end:{int(time.time())}:bisect_{self.section}\r{_ESC}\n")
            self.stream.flush()
        self.section = None

    def __call__(self, event: object) -> None:
        from gatekeeper.bisect import Event

        assert isinstance(event, Event)  # narrows the type for mypy  # nosec B101
        if event.kind == "start":
            self.line(f"gatekeeper bisect: {event.text}")
        elif event.kind == "step":
            self.open(event.candidate, f"bisect: candidate {event.run} (of ~{self._expected}): {event.candidate}")
            if self.tty:
                self.progress(f"bisect: candidate {event.run}/~{self._expected}: {event.candidate}")
        elif event.kind == "round":
            self.progress(f"bisect: candidate {event.run}/~{self._expected}: {event.text}")
        elif event.kind == "decided":
            self.line(f"  {event.text}")
            self.close()
        elif event.kind == "note":
            self.line(f"gatekeeper bisect: {event.text}")
        elif event.kind == "done":
            self.close()
            self._clear()

    _expected = 0

    def expect(self, n: int) -> None:
        self._expected = n


def _run(args: argparse.Namespace) -> int:
    from gatekeeper.bisect import BisectOptions

    rest = list(args.rest[1:] if args.rest[:1] == ["--"] else args.rest)
    if args.since_change:
        return _since_change(args, rest)
    if args.history:
        raise InputError(None, "--history", "--history goes with --since-change", "add --since-change STATE")
    if args.since_green:
        from gatekeeper.bisect.nightly import plan_since_green

        plan = plan_since_green(
            verdict=Path(args.verdict) if args.verdict else None,
            state=Path(args.since_green),
            index_url=args.index_url,
        )
        print(f"gatekeeper bisect: {terminal(plan.reason, newlines=False)}")
        if plan.provider is None:
            return 0
        provider, good, bad = plan.provider, plan.good, plan.bad
        options = {**_provider_options(args), **plan.options}
    else:
        if args.verdict:
            raise InputError(None, "--verdict", "--verdict goes with --since-green", "add --since-green STATE")
        if args.resume and not args.provider:
            return _resume(args, rest)
        for name in ("provider", "good", "bad"):
            if not getattr(args, name):
                raise InputError(None, f"--{name}", "is required", "e.g. --provider git --good v1.2 --bad main")
        provider, good, bad = args.provider, args.good, args.bad
        options = _provider_options(args)
    opts = BisectOptions(
        provider=provider,
        good=good,
        bad=bad,
        out=Path(args.out),
        stage=args.stage,
        stage_args=tuple(rest) if args.stage else (),
        command=() if args.stage else tuple(rest),
        metric=args.metric,
        channel=args.channel,
        gates=Path(args.gates) if args.gates else None,
        max_processes=args.max_processes,
        timeout=args.timeout,
        resume=args.resume,
        provider_options=options,
        bundle=not args.no_bundle,
    )
    return _execute(opts)


def _since_change(args: argparse.Namespace, rest: list[str]) -> int:
    """``--since-change``: bisect the newest unconfirmed change point of the history not bisected yet. The
    change is recorded in STATE once the bisection has started (its candidates listed): a start that fails is
    retried the next night, a bisection that started (even one a job timeout ends) is not run again."""
    from gatekeeper.bisect import BisectOptions
    from gatekeeper.bisect.since_change import plan_since_change, record_bisected

    for name in ("since_green", "verdict", "provider", "good", "bad", "resume"):
        if getattr(args, name):
            flag = "--" + name.replace("_", "-")
            raise InputError(None, flag, f"{flag} does not go with --since-change", f"drop {flag}")
    if not args.history:
        raise InputError(None, "--history", "--since-change needs the history store", "add --history sqlite:PATH")
    state = Path(args.since_change)
    found = plan_since_change(
        state=state, history=args.history, metric=args.metric, channel=args.channel, index_url=args.index_url
    )
    plan = found.plan
    warnings(found.skipped)  # a stored record that does not read is said, as history changes says it
    print(f"gatekeeper bisect: {terminal(plan.reason, newlines=False)}")
    if plan.provider is None or found.identity is None:
        return 0
    identity = found.identity
    opts = BisectOptions(
        provider=plan.provider,
        good=plan.good,
        bad=plan.bad,
        out=Path(args.out),
        stage=args.stage or found.stage,
        stage_args=tuple(rest),
        command=(),
        metric=found.metric,
        channel=args.channel or found.channel,
        gates=Path(args.gates) if args.gates else None,
        max_processes=args.max_processes,
        timeout=args.timeout,
        resume=False,
        provider_options={**_provider_options(args, plan.provider), **plan.options},
        bundle=not args.no_bundle,
    )

    def started() -> None:
        record_bisected(state, identity)
        print(f"gatekeeper bisect: recorded in {terminal(str(state), newlines=False)}: not bisected again")

    return _execute(opts, on_start=started)


def _resume(args: argparse.Namespace, rest: list[str]) -> int:
    """``--resume`` alone: every option as bisect.json recorded it."""
    from gatekeeper.bisect import BisectOptions
    from gatekeeper.contract.bisect_report import read_bisect

    path = Path(args.out) / "bisect.json"
    if not path.exists():
        raise InputError(path, "", "nothing to resume: no bisect.json here", "give --out of the interrupted bisection")
    req = read_bisect(path)["request"]
    opts = BisectOptions(
        provider=req["provider"],
        good=req["good"],
        bad=req["bad"],
        out=Path(args.out),
        stage=req["stage"],
        stage_args=tuple(req["stage_args"]),
        command=tuple(req["command"]),
        metric=req["metric"],
        channel=req["channel"],
        gates=Path(req["gates_file"]) if req["gates_file"] else None,
        max_processes=req["max_processes"],
        timeout=req["timeout_s"],
        resume=True,
        provider_options=req["options"],
        bundle=not args.no_bundle,
    )
    return _execute(opts)


def _execute(opts: BisectOptions, on_start: Callable[[], None] | None = None) -> int:
    from gatekeeper.bisect import run_bisect
    from gatekeeper.bisect.render import changes_lines, table_lines
    from gatekeeper.bisect.search import max_decisions

    printer = Printer(sys.stdout)
    printer.expect(0)

    def on_event(event: object) -> None:
        if getattr(event, "kind", "") == "start":
            printer.expect(getattr(event, "expected", 0))
        printer(event)
        if getattr(event, "kind", "") == "start" and on_start is not None:
            on_start()

    try:
        result = run_bisect(opts, on_event)
    except KeyboardInterrupt:
        printer.close()
        print(
            f"gatekeeper bisect: interrupted; every finished measurement is in {opts.out / 'bisect.json'} "
            f"(gatekeeper bisect --resume --out {opts.out} continues)",
            file=sys.stderr,
        )
        return 2
    doc = result.doc
    print("")
    for line in table_lines(doc):
        print(terminal(line, newlines=False))
    res = doc["result"]
    cands = doc["candidates"]
    print("")
    for c in res["culprits"]:
        first, last = cands[c["first_bad"]], cands[c["last_good"]]
        if c["exact"]:
            print(terminal(f"first bad: {first['ref']} (last good {last['ref']})", newlines=False))
        else:
            maybe = ", ".join(cands[i]["label"] for i in c["unresolved"])
            print(terminal(f"first bad: one of {maybe}, {first['label']} (they could not be decided)", newlines=False))
        for line in changes_lines(c["changes"]):
            print(terminal("  " + line, newlines=False))
    n = doc["summary"]["candidates"]
    print(f"{doc['summary']['run']} of {n} candidates run (at most {max_decisions(n)} on a clean range)")
    print(f"bisect.json: {result.path}")
    if res.get("repro_bundle"):
        print(f"repro bundle: {result.path.parent / res['repro_bundle']}")
    return result.exit_code


def _provider_options(args: argparse.Namespace, provider: str | None = None) -> dict[str, str | None]:
    provider = provider or args.provider
    if provider == "pip" or args.package:
        return {"package": args.package, "index_url": args.index_url, "find_links": args.find_links}
    if provider == "image" or args.image:
        return {"image": args.image, "engine": args.engine, "tags_file": args.tags_file, "gpu": args.gpu}
    return {}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bisect",
        help="find the first bad commit, package version or image between a good and a bad one",
        description="Bisect between --good and --bad. With --stage the stage runs for each candidate and the gates "
        "(and the statistical judge) decide, against the good candidate; with -- COMMAND the exit code decides as for "
        "git bisect run (0 good, 125 skip, 1-127 bad). Stage options go after -- when --stage is given.",
        epilog="Exit codes: 0 first bad found, 3 found only up to candidates that could not be decided, "
        "2 bad input (good not older than bad, an empty range, a good that measures bad, a missing tool).",
    )
    p.add_argument("--provider", choices=["git", "pip", "image"], help="what the candidates are")
    p.add_argument("--good", help="the last known good candidate (commit, version or tag)")
    p.add_argument("--bad", help="a known bad candidate, newer than --good")
    p.add_argument("--stage", help="the stage to run for each candidate (else -- COMMAND)")
    p.add_argument("--metric", help="only the gates on this metric of the stage decide, e.g. latency_ms")
    p.add_argument("--out", default="bisect", help="directory of bisect.json, the rounds and the repro bundle")
    p.add_argument("--resume", action="store_true", help="continue the bisection recorded in OUT/bisect.json")
    p.add_argument("--gates", help="gates file (default: ./gates.yaml if present, else the built-in default gates)")
    p.add_argument("--channel", choices=["stable", "nightly"], help="the channel the gates apply for")
    p.add_argument(
        "--max-processes", type=int, default=15, help="per candidate, while a comparison is unknown (default 15)"
    )
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per stage or command run (default 3600)")
    p.add_argument("--no-bundle", action="store_true", help="do not write the repro bundle")
    g = p.add_argument_group("pip provider")
    g.add_argument("--package", help="the package whose versions are bisected, e.g. torch")
    g.add_argument("--index-url", help="the index to install from (e.g. a nightly index)")
    g.add_argument("--find-links", help="a directory of wheels to install from")
    g = p.add_argument_group("image provider")
    g.add_argument("--image", help="the image repository, e.g. rocm/pytorch")
    g.add_argument("--engine", choices=["docker", "podman"], help="default: whichever is installed")
    g.add_argument("--tags-file", help="the tags in order, oldest first, one a line (default: the local tags)")
    g.add_argument("--gpu", default="auto", choices=["auto", "rocm", "cuda", "none"], help="device flags (auto)")
    g = p.add_argument_group("nightly (CI)")
    g.add_argument(
        "--since-green",
        metavar="STATE",
        help="decide from the nightly verdict whether the channel turned red after a green night (state kept in "
        "STATE), and bisect the night's change (torch version, else commit)",
    )
    g.add_argument("--verdict", help="with --since-green: tonight's nightly verdict.json")
    g.add_argument(
        "--since-change",
        metavar="STATE",
        help="bisect the newest unconfirmed change point of the history store (--history; of --metric and --channel "
        "when given) not yet recorded in STATE, between its two ends (torch version, else image tag, else commit), "
        "judged by its stage and metric",
    )
    g.add_argument("--history", help="with --since-change: the history store, sqlite:PATH or postgresql://USER@HOST/DB")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="-- then the command, or the stage options with --stage")
    p.set_defaults(handler=_run)
