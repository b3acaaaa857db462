"""The ``gatekeeper`` command: argparse and dispatch only.

Each subcommand parses its arguments and calls one library function with
explicit keyword arguments. InputError is caught here, in one place, and
becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gatekeeper import __version__
from gatekeeper.errors import InputError
from gatekeeper.exitcodes import ExitCode

if TYPE_CHECKING:
    from gatekeeper.verdict import Verdict

__all__ = ["main"]

Handler = Callable[[argparse.Namespace], int]


def _cmd_stage(args: argparse.Namespace) -> int:
    from stages import STAGES, load_stage

    if args.name not in STAGES:
        raise InputError(None, "stage", f"unknown stage {args.name!r}", f"one of: {', '.join(STAGES)}")
    return load_stage(args.name).main(args.stage_args)


def _print_verdict(verdict: Verdict) -> int:
    from gatekeeper.render import banner

    print(banner(verdict), file=sys.stderr if verdict.result != "pass" else sys.stdout)
    return int(verdict.exit_code)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from gatekeeper.workflow import run_evaluate

    verdict = run_evaluate(
        artifacts=args.artifacts,
        gates_path=args.gates,
        out=args.out or args.artifacts,
        baseline=args.baseline,
        channel=args.channel,
        record=args.record,
    )
    print(f"gatekeeper: wrote {args.out or args.artifacts}/verdict.json, verdict.md, gates.junit.xml, metrics.txt")
    return _print_verdict(verdict)


def _cmd_pipeline(args: argparse.Namespace) -> int:
    from gatekeeper.pipeline import PipelineOptions, run_pipeline

    verdict = run_pipeline(
        PipelineOptions(
            out=args.out,
            gates=args.gates,
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
    return _print_verdict(verdict)


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


def _cmd_report(args: argparse.Namespace) -> int:
    from gatekeeper.report import write_report

    path = write_report(
        artifacts=args.artifacts,
        out=args.out,
        fmt=args.format,
        history=args.history,
        baseline=args.baseline,
        limit=args.runs,
    )
    print(f"gatekeeper: wrote {path}")
    return ExitCode.PASS


def _cmd_matrix(args: argparse.Namespace) -> int:
    from gatekeeper.matrix import write_matrix

    paths = write_matrix(history=args.history, matrix_file=args.matrix_file, out=args.out, limit=args.limit)
    print(f"gatekeeper: wrote {', '.join(str(p) for p in paths)}")
    return ExitCode.PASS


def _cmd_advise(args: argparse.Namespace) -> int:
    from gatekeeper.advise import AdviseInputs, run_advise

    text = run_advise(
        AdviseInputs(
            downstream=tuple(d.strip() for d in (args.downstream or "").split(",") if d.strip()),
            model_family=args.model_family,
            rocm_minor_locked=args.rocm_minor_locked,
            needs_nightly_feature=args.needs_nightly_feature,
            compat_owner=args.compat_owner,
        ),
        history=args.history,
        breaker_state=tuple(args.breaker_state),
        arch=args.arch,
        runs=args.runs,
        fmt=args.format,
    )
    print(text, end="")
    return ExitCode.PASS


def _add_release_parsers(sub: argparse._SubParsersAction) -> None:
    """report, matrix, advise: the release manager's commands."""
    p = sub.add_parser("report", help="write the HTML (or markdown) report of one pipeline's artifacts")
    p.add_argument("--artifacts", type=Path, default=Path("artifacts"), help="directory of <stage>.json, verdict.json")
    p.add_argument("--history", help="store of earlier runs for trends: DIR, sqlite:PATH, ...")
    p.add_argument("--baseline", help="baseline store for the latency comparison (default: newest run in --history)")
    p.add_argument("--out", type=Path, default=Path("report.html"), help="output file (default: report.html)")
    p.add_argument("--format", choices=["html", "md"], default="html", help="html (default) or md (an MR note)")
    p.add_argument("--runs", type=int, default=10, help="runs shown in trends, this one included (default 10)")
    p.set_defaults(handler=_cmd_report)

    p = sub.add_parser("matrix", help="the torch x ROCm x GPU version matrix from the history store and matrix.yaml")
    p.add_argument("--history", help="store of recorded runs: DIR, sqlite:PATH, ...")
    p.add_argument("--matrix-file", type=Path, help="EOL dates and CVEs (default: ./matrix.yaml when present)")
    p.add_argument("--out", type=Path, default=Path("matrix"), help="directory for matrix.md/.html/.csv")
    p.add_argument("--limit", type=int, default=1000, help="runs read from the store per stage (default 1000)")
    p.set_defaults(handler=_cmd_matrix)

    p = sub.add_parser("advise", help="stable or nightly for this repo: hard rules, then recorded evidence")
    p.add_argument("--history", help="store of recorded runs of both channels: DIR, sqlite:PATH, ...")
    p.add_argument("--downstream", help="comma-separated downstream runtimes, e.g. onnxruntime,tensorrt")
    p.add_argument("--model-family", choices=["cnn", "vit", "diffusion", "llm", "other"], default="other")
    p.add_argument(
        "--rocm-minor-locked",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the ROCm minor version is pinned (default: yes)",
    )
    p.add_argument("--needs-nightly-feature", action="store_true", help="the repo needs a nightly-only feature")
    p.add_argument("--compat-owner", help="who owns compatibility fixes for this repo")
    p.add_argument(
        "--breaker-state", action="append", default=[], metavar="FILE", help="breaker state JSON (file or directory)"
    )
    p.add_argument("--arch", help="device architecture, e.g. gfx90a (default: that of the newest recorded run)")
    p.add_argument("--runs", type=int, default=10, help="recent runs per channel weighed (default 10)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(handler=_cmd_advise)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from gatekeeper.doctor import run_doctor

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


def _cmd_ab(args: argparse.Namespace) -> int:
    from gatekeeper.ab import run_ab

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


def _cmd_cache(args: argparse.Namespace) -> int:
    from gatekeeper import cache_commands as cc

    if args.action == "key":
        return cc.key_command(as_json=args.json)
    if args.action == "env":
        return cc.env_command(root=args.root, as_json=args.json, keep_headers=args.keep_inductor_headers)
    if args.action == "stats":
        return cc.stats_command(root=args.root, start=args.begin, as_json=args.json, out_file=args.out, into=args.into)
    return cc.prune_command(root=args.root, max_size=args.max_size)


def _cmd_breaker(args: argparse.Namespace) -> int:
    import os

    from gatekeeper import breaker_commands as bc

    env, common = os.environ, {"state": args.state}
    if args.action == "check":
        return bc.check_command(
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
        return bc.record_command(
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
        return bc.reset_command(
            channel=args.channel, job=args.job, by=args.by, reason=args.reason, environ=env, **common
        )
    return bc.status_command(as_json=args.json, environ=env, **common)


def _add_cache_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="the compiled-kernel cache: key, env, stats, prune")
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = acts.add_parser("key", help="print the cache key (Python, torch + git hash, HIP/CUDA, GPU archs, MIOpen)")
    a.add_argument("--json", action="store_true", help="print the key and its fingerprint as JSON")
    a = acts.add_parser("env", help="print export lines pointing every compiler cache under one root")
    a.add_argument("--json", action="store_true")
    a.add_argument("--root", help="cache root (default $GATEKEEPER_CACHE_DIR or .gatekeeper-cache)")
    a.add_argument(
        "--keep-inductor-headers",
        action="store_true",
        help="link $TMPDIR/torchinductor_$USER/precompiled_headers into the root (CI jobs, with a job-local TMPDIR)",
    )
    a = acts.add_parser("stats", help="sizes, file counts, entries used/created; corrupt entries moved aside")
    a.add_argument("--root")
    a.add_argument(
        "--begin", action="store_true", help="snapshot at job start (entries used/created are relative to it)"
    )
    a.add_argument("--json", action="store_true")
    a.add_argument("--out", help="also write the stats as JSON to this file")
    a.add_argument("--into", metavar="STAGE_JSON", help="add kernel_cache_* metrics to this stage report")
    a = acts.add_parser("prune", help="delete least-recently-used files until the cache fits")
    a.add_argument("--root")
    a.add_argument("--max-size", required=True, help="e.g. 2G, 500M")
    p.set_defaults(handler=_cmd_cache)


def _add_breaker_parser(sub: argparse._SubParsersAction) -> None:
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
    p.set_defaults(handler=_cmd_breaker)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gatekeeper",
        description="Quality gates and circuit breakers for PyTorch on ROCm, CUDA and CPU.",
        epilog="Exit codes: 0 pass, 1 blocked by a gate, 2 usage or input error, 3 passed with warnings, "
        "4 circuit breaker open (skipped).",
    )
    parser.add_argument("--version", action="version", version=f"gatekeeper {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("stage", help="run one stage (gatekeeper stage NAME --help for its options)", add_help=False)
    p.add_argument("name", help="verify_hip, functional_test, performance_baseline or compatibility_check")
    p.add_argument("stage_args", nargs=argparse.REMAINDER)
    p.set_defaults(handler=_cmd_stage)
    _add_cache_parser(sub)
    _add_breaker_parser(sub)

    p = sub.add_parser("evaluate", help="evaluate stage artifacts against gates.yaml and baselines; write the verdict")
    p.add_argument(
        "--artifacts", type=Path, default=Path("artifacts"), help="directory of <stage>.json (default: artifacts)"
    )
    p.add_argument("--gates", type=Path, default=Path("gates.yaml"), help="gates file (default: gates.yaml)")
    p.add_argument("--baseline", help="baseline store: DIR, sqlite:PATH, gitlab: or git:BRANCH")
    p.add_argument(
        "--channel", choices=["stable", "nightly"], help="default: $GATEKEEPER_CHANNEL, else the stages' own"
    )
    p.add_argument("--out", type=Path, help="where to write the verdict (default: the artifacts directory)")
    p.add_argument("--record", metavar="STORE", help="also keep this run's results and verdict in a history store")
    p.set_defaults(handler=_cmd_evaluate)

    p = sub.add_parser("pipeline", help="run every stage, then evaluate (the whole job on one machine)")
    p.add_argument("--out", type=Path, default=Path("artifacts"))
    p.add_argument("--gates", type=Path, default=Path("gates.yaml"))
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
    _add_release_parsers(sub)

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

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit_:
        return ExitCode.PASS if exit_.code == 0 else ExitCode.INPUT_ERROR
    handler: Handler = args.handler
    try:
        return int(handler(args))
    except InputError as err:
        print(f"gatekeeper: {err.line()}", file=sys.stderr)
        return ExitCode.INPUT_ERROR
    except KeyboardInterrupt:
        print("gatekeeper: interrupted", file=sys.stderr)
        return ExitCode.INPUT_ERROR
