"""``gatekeeper evaluate``: stage artifacts against the gates and baselines; write the verdict."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gatekeeper.cli import terminal
from gatekeeper.cli._shared import GATES_HELP

if TYPE_CHECKING:
    from gatekeeper.contract.verdict import Verdict

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from gatekeeper.evaluate.gates import default_gates_path
    from gatekeeper.evaluate.run import run_evaluate

    verdict = run_evaluate(
        artifacts=args.artifacts,
        gates_path=default_gates_path(args.gates),
        out=args.out or args.artifacts,
        baseline=args.baseline,
        channel=args.channel,
        record=args.record,
        record_blocked=args.record_blocked,
        gates_ref=args.gates_ref,
        log=terminal.err,
        not_selected=_not_selected(args.stages),
    )
    where = args.out or args.artifacts
    terminal.out(f"gatekeeper: wrote {where}/verdict.json, verdict.md, gates.junit.xml, metrics.txt")
    _blocking_categories(verdict, Path(args.artifacts))
    return terminal.show_banner(verdict)


def _blocking_categories(verdict: Verdict, artifacts: Path) -> None:
    from gatekeeper.analyze.structured import blocking_lines

    for line in blocking_lines(verdict, artifacts):
        terminal.err(line)


def _not_selected(stages: str | None) -> frozenset[str]:
    """The stages left out of a ``--stages a,b`` run (their gates are skipped, as ``pipeline --stages`` does)."""
    if not stages:
        return frozenset()
    from gatekeeper.contract.stage_names import STAGE_NAMES
    from gatekeeper.core.errors import InputError

    chosen = [s.strip() for s in stages.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in STAGE_NAMES]
    if unknown or not chosen:
        raise InputError(None, "--stages", f"unknown stage(s): {', '.join(unknown) or stages!r}",
                         f"available: {', '.join(STAGE_NAMES)}")  # fmt: skip
    return frozenset(STAGE_NAMES) - set(chosen)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="evaluate stage artifacts against gates.yaml and baselines; write the verdict")
    p.add_argument(
        "--artifacts", type=Path, default=Path("artifacts"), help="directory of <stage>.json (default: artifacts)"
    )
    p.add_argument("--gates", type=Path, help=GATES_HELP)
    p.add_argument(
        "--gates-ref",
        metavar="REF",
        help="apply the gates file as it is at git REF (a merge request's target branch), a fully qualified ref "
        "(refs/remotes/origin/main) or a full commit SHA; every difference of this branch's copy is a named warning",
    )
    p.add_argument(
        "--baseline",
        help="baseline store: DIR or file:DIR, sqlite:PATH, postgresql://USER@HOST/DB, gitlab: or git:BRANCH",
    )
    p.add_argument(
        "--channel",
        choices=["stable", "nightly"],
        help="the job's channel (default: $GATEKEEPER_CHANNEL, else stable); every artifact must report it",
    )
    p.add_argument("--out", type=Path, help="where to write the verdict (default: the artifacts directory)")
    p.add_argument(
        "--record",
        metavar="STORE",
        help="also keep this run's results and verdict in a history store (only a pass or warn verdict)",
    )
    p.add_argument(
        "--stages",
        metavar="A,B",
        help="only these stages ran (as pipeline --stages): the gates of the others are skipped, not failed",
    )
    p.add_argument(
        "--record-blocked", action="store_true", help="with --record: keep a blocked run too (never a baseline)"
    )
    p.set_defaults(handler=_run)
