"""``gatekeeper cache`` and ``breaker``: arguments and dispatch only."""

from __future__ import annotations

import argparse

__all__ = ["add_parsers"]


def _cmd_cache(args: argparse.Namespace) -> int:
    from gatekeeper.cli import cache as cc

    if args.action == "key":
        return cc.key_command(as_json=args.json)
    if args.action == "env":
        return cc.env_command(root=args.root, as_json=args.json, keep_headers=args.keep_inductor_headers)
    if args.action == "stats":
        return cc.stats_command(root=args.root, start=args.begin, as_json=args.json, out_file=args.out, into=args.into)
    return cc.prune_command(root=args.root, max_size=args.max_size)


def _cmd_breaker(args: argparse.Namespace) -> int:
    import os

    from gatekeeper.cli import breaker as bc

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


def add_parsers(sub: argparse._SubParsersAction) -> None:
    _add_cache_parser(sub)
    _add_breaker_parser(sub)
