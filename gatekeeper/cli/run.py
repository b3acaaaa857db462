"""``gatekeeper stage``, ``pipeline``, ``evaluate`` and ``ab``: arguments and dispatch only."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatekeeper.cli._shared import print_verdict
from gatekeeper.core.errors import InputError

__all__ = ["add_parsers"]

GATES_HELP = "gates file (default: ./gates.yaml if present, else the built-in default gates)"


def _cmd_stage(args: argparse.Namespace) -> int:
    from stages import STAGES, load_stage

    if args.name not in STAGES:
        raise InputError(None, "stage", f"unknown stage {args.name!r}", f"one of: {', '.join(STAGES)}")
    return load_stage(args.name).main(args.stage_args)


def _cmd_evaluate(args: argparse.Namespace) -> int:
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
    )
    print(f"gatekeeper: wrote {args.out or args.artifacts}/verdict.json, verdict.md, gates.junit.xml, metrics.txt")
    return print_verdict(verdict)


def _cmd_pipeline(args: argparse.Namespace) -> int:
    from gatekeeper.evaluate.gates import default_gates_path
    from gatekeeper.run.pipeline import PipelineOptions, run_pipeline

    verdict = run_pipeline(
        PipelineOptions(
            out=args.out,
            gates=default_gates_path(args.gates),
            device=args.device,
            channel=args.channel,
            model=args.model,
            baseline=args.baseline,
            record=args.record,
            stages=tuple(args.stages.split(",")) if args.stages else (),
            stage_args=_stage_args(args.stage_arg),
            stage_timeout=args.stage_timeout,
            quick=args.quick,
        )
    )
    md = (args.out / "verdict.md").read_text(encoding="utf-8")
    print("\n" + md)
    return print_verdict(verdict)


def _stage_args(items: list[str]) -> dict[str, list[str]]:
    import shlex

    out: dict[str, list[str]] = {}
    for item in items:
        name, sep, rest = item.partition("=")
        if not sep:
            raise InputError(
                None, "--stage-arg", f"{item!r} is not STAGE=ARGS", 'e.g. --stage-arg functional_test="--seeds 2"'
            )
        out.setdefault(name, []).extend(shlex.split(rest))
    return out


def _cmd_ab(args: argparse.Namespace) -> int:
    from gatekeeper.run.ab import run_ab

    stage_args = args.stage_args[1:] if args.stage_args[:1] == ["--"] else args.stage_args
    return run_ab(
        base=args.base,
        out=args.out,
        stage=args.stage,
        rounds=args.rounds,
        metric=args.metric,
        max_cv=args.max_cv,
        stage_args=stage_args,
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stage", help="run one stage (gatekeeper stage NAME --help for its options)", add_help=False)
    p.add_argument("name", help="verify_hip, functional_test, performance_baseline or compatibility_check")
    p.add_argument("stage_args", nargs=argparse.REMAINDER)
    p.set_defaults(handler=_cmd_stage)
    p = sub.add_parser("evaluate", help="evaluate stage artifacts against gates.yaml and baselines; write the verdict")
    p.add_argument(
        "--artifacts", type=Path, default=Path("artifacts"), help="directory of <stage>.json (default: artifacts)"
    )
    p.add_argument("--gates", type=Path, help=GATES_HELP)
    p.add_argument(
        "--gates-ref",
        metavar="REF",
        help="apply the gates file as it is at git REF (a merge request's target branch); every difference of "
        "this branch's copy is a named warning",
    )
    p.add_argument("--baseline", help="baseline store: DIR, sqlite:PATH, gitlab: or git:BRANCH")
    p.add_argument(
        "--channel", choices=["stable", "nightly"], help="default: $GATEKEEPER_CHANNEL, else the stages' own"
    )
    p.add_argument("--out", type=Path, help="where to write the verdict (default: the artifacts directory)")
    p.add_argument(
        "--record",
        metavar="STORE",
        help="also keep this run's results and verdict in a history store (only a pass or warn verdict)",
    )
    p.add_argument(
        "--record-blocked", action="store_true", help="with --record: keep a blocked run too (never a baseline)"
    )
    p.set_defaults(handler=_cmd_evaluate)

    p = sub.add_parser("pipeline", help="run every stage, then evaluate (the whole job on one machine)")
    p.add_argument("--out", type=Path, default=Path("artifacts"))
    p.add_argument("--gates", type=Path, help=GATES_HELP)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--channel", choices=["stable", "nightly"])
    p.add_argument("--model", help="module:factory (default: the built-in demo model)")
    p.add_argument("--baseline", help="baseline store: DIR, sqlite:PATH, gitlab: or git:BRANCH")
    p.add_argument("--record", metavar="STORE", help="keep this run's results and verdict in a history store")
    p.add_argument("--stages", help="comma-separated subset, in pipeline order (default: all)")
    p.add_argument(
        "--stage-arg", action="append", default=[], metavar="STAGE=ARGS", help="extra arguments for one stage"
    )
    p.add_argument("--stage-timeout", type=float, default=3600.0, help="seconds before a stage process is killed")
    p.add_argument("--quick", action="store_true", help="reduced seeds, processes and trials: a fast smoke run")
    p.set_defaults(handler=_cmd_pipeline)
    p = sub.add_parser(
        "ab",
        help="run a stage for base and head alternately (ABAB) and judge the difference",
        description="Check out --base in a temporary worktree, run the stage for base and head alternately, and "
        "compare. Exit 1 on a regression, 3 inconclusive, 0 otherwise. Stage options go after --.",
    )
    p.add_argument("--base", required=True, help="the commit, branch or tag to compare against")
    p.add_argument("--stage", default="performance_baseline", help="default: performance_baseline")
    p.add_argument("--rounds", type=int, default=2, help="ABAB rounds (default 2)")
    p.add_argument("--metric", default="latency_ms", help="the metric with per-process samples (default latency_ms)")
    p.add_argument("--max-cv", type=float, default=0.05, help="a side fluctuating more is inconclusive (0.05)")
    p.add_argument("--out", required=True, help="directory for each run's artifacts and ab.json")
    p.add_argument("stage_args", nargs=argparse.REMAINDER, help="-- then options for the stage")
    p.set_defaults(handler=_cmd_ab)
