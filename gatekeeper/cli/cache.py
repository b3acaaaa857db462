"""``gatekeeper cache``: key, env, stats, prune. Each shows its lines through the terminal writer
(``cli/terminal.py``) for a CI log and returns an exit code."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from gatekeeper.cli import terminal
from gatekeeper.core import escape, files
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode
from gatekeeper.core.paths import cache_root
from gatekeeper.kernel_cache.integrity import check_and_quarantine
from gatekeeper.kernel_cache.key import (
    cache_env,
    cache_fingerprint,
    cache_key,
    export_lines,
    link_inductor_headers,
)
from gatekeeper.kernel_cache.usage import SNAPSHOT, add_to_stage_report, begin, collect_stats, parse_size, prune

__all__ = ["add_parser", "env_command", "key_command", "prune_command", "stats_command"]


def _root(root: str | None, environ: Mapping[str, str] | None) -> Path:
    return Path(root).resolve() if root else cache_root(environ)


def key_command(*, as_json: bool = False, environ: Mapping[str, str] | None = None) -> int:
    fingerprint = cache_fingerprint(environ)
    key = cache_key(fingerprint)
    if as_json:
        terminal.out_json({"key": key, "fingerprint": fingerprint})
    else:
        terminal.out(key)
    return ExitCode.PASS


def env_command(
    *,
    root: str | None = None,
    as_json: bool = False,
    keep_headers: bool = False,
    environ: Mapping[str, str] | None = None,
) -> int:
    base = _root(root, environ)
    variables = {"GATEKEEPER_CACHE_DIR": str(base), **cache_env(base, environ)}
    for value in variables.values():
        Path(value).mkdir(parents=True, exist_ok=True)  # MIOpen refuses a user db dir that does not exist
    if keep_headers:
        # stderr: stdout is eval'd by the job's shell.
        terminal.err(f"gatekeeper: cache: {link_inductor_headers(base)}")
    if as_json:
        terminal.out_json(variables)
    else:
        terminal.out(export_lines(variables), end="")
    return ExitCode.PASS


def _line(text: str) -> None:
    """One line on stdout: the names in it are the cache's (any job wrote them), so a newline or an escape
    sequence in a file name is shown escaped and cannot start a line of its own."""
    terminal.out(escape.terminal(text, newlines=False))


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def stats_command(
    *,
    root: str | None = None,
    start: bool = False,
    as_json: bool = False,
    out_file: str | None = None,
    into: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    base = _root(root, environ)
    # Corruption is checked at every call: at the start so this job rebuilds
    # the entry, at the end so the cache GitLab saves is sound. Before --begin,
    # whatever is under the snapshot's name and is no regular file is moved aside too.
    corrupt = [c.__dict__ for c in check_and_quarantine(base, own=(SNAPSHOT,), replace_own=start)]
    for c in corrupt:
        where = f"moved to {c['moved_to']}" if c["moved_to"] else "left in place"
        _line(f"gatekeeper: cache: corrupt entry {c['path']} ({c['problem']}); {where}")
    if start:
        snap = begin(base)
        _line(f"gatekeeper: cache: {len(snap['files'])} entries at job start in {base}")
        return ExitCode.PASS
    stats = collect_stats(base, corrupt)
    if out_file:
        files.write_json(out_file, stats.to_dict())
    if as_json:
        terminal.out_json(stats.to_dict())
    else:
        _line(f"kernel cache {base}: {_human(stats.total_bytes)} in {stats.total_files} files")
        for kind, v in stats.by_kind.items():
            _line(f"  {kind:<18} {_human(v['bytes']):>10} {v['files']:>7} files")
        used = stats.used if stats.used is not None else f"unknown ({stats.used_unknown_reason})"
        created = stats.created if stats.created is not None else "unknown"
        _line(f"  this job: entries used {used}, created {created}; corrupt {len(corrupt)}")
    if into:
        _line(f"gatekeeper: cache: {add_to_stage_report(Path(into), stats)}")
    return ExitCode.PASS


def prune_command(*, root: str | None = None, max_size: str, environ: Mapping[str, str] | None = None) -> int:
    base = _root(root, environ)
    limit = parse_size(max_size)
    if not base.is_dir():
        raise InputError(base, "", "kernel cache directory not found", "set GATEKEEPER_CACHE_DIR or pass --root")
    result = prune(base, limit)
    _line(
        f"gatekeeper: cache: pruned {result.removed_files} files ({_human(result.removed_bytes)}); "
        f"{_human(result.before_bytes)} -> {_human(result.after_bytes)} (limit {_human(limit)})"
    )
    return ExitCode.PASS


# --- the command line: arguments and dispatch ---


def _run(args: argparse.Namespace) -> int:
    if args.action == "key":
        return key_command(as_json=args.json)
    if args.action == "env":
        return env_command(root=args.root, as_json=args.json, keep_headers=args.keep_inductor_headers)
    if args.action == "stats":
        return stats_command(root=args.root, start=args.begin, as_json=args.json, out_file=args.out, into=args.into)
    return prune_command(root=args.root, max_size=args.max_size)


def add_parser(sub: argparse._SubParsersAction) -> None:
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
    p.set_defaults(handler=_run)
