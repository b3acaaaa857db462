"""The ``gatekeeper`` command: argparse and dispatch only.

Each subcommand parses its arguments and calls one library function with
explicit keyword arguments; one module per command lives beside this file. InputError is caught here, in one place, and
becomes one line on stderr and exit code 2; any other exception is a bug:
one line on stderr, the traceback in a saved log, exit code 70.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from gatekeeper import __version__
from gatekeeper.cli import terminal
from gatekeeper.core import escape
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]
VERSION = f"gatekeeper {__version__}"


# command -> the module beside this file that defines it, in the order `gatekeeper --help` lists them.
# tests/test_cli.py holds this table to what each module registers.
COMMANDS = {
    "stage": "stage",
    "pipeline": "pipeline",
    "gpu-check": "gpu_check",
    "evaluate": "evaluate",
    "ab": "ab",
    "bisect": "bisect",
    "report": "report",
    "matrix": "matrix",
    "advise": "advise",
    "history": "history",
    "doctor": "doctor",
    "analyze": "analyze",
    "notify": "notify",
    "cache": "cache",
    "breaker": "breaker",
}


def _commands(only: str | None = None) -> tuple[ModuleType, ...]:
    """The command modules: all of them, or ``only`` the one a command line names.

    Imported here, not at the top: ``gatekeeper --version`` must answer from an install without the
    dependencies (``pip install --no-deps``; tests/test_release.py). And one command imports only its own
    module: evaluate, which runs on every pipeline, does not load what bisect, cache or notify need
    (OpenSSL, SQLite, ...; benchmarks/README.md, "Evaluate over a large JUnit file").
    """
    import importlib

    names = [COMMANDS[only]] if only in COMMANDS else list(COMMANDS.values())
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in names)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gatekeeper",
        description="Quality gates and circuit breakers for PyTorch on ROCm, CUDA and CPU.",
        epilog="Exit codes: 0 pass, 1 blocked by a gate, 2 usage or input error, 3 passed with warnings, "
        "4 circuit breaker open (skipped), 70 a bug in gatekeeper itself (traceback saved).",
    )
    parser.add_argument("--version", action="version", version=VERSION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _commands(only):
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Everything a command shows passes the redactor (a gate reason can quote a log line with a token) and the
    # terminal escaping (cli/terminal.py), also what argparse writes on its own.
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = terminal.Guarded(out), terminal.Guarded(err)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments == ["--version"]:
        terminal.out(VERSION)
        return ExitCode.PASS
    parser = build_parser(only=arguments[0] if arguments else None)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exit_:
        return ExitCode.PASS if exit_.code == 0 else ExitCode.INPUT_ERROR
    handler: Handler = args.handler
    try:
        return int(handler(args))
    except InputError as err:
        # The line quotes the input (a key, a name, a value): one line, no escape sequence of it reaches the terminal.
        terminal.err(f"gatekeeper: {escape.terminal(err.line(), newlines=False)}")
        return ExitCode.INPUT_ERROR
    except KeyboardInterrupt:
        terminal.err("gatekeeper: interrupted")
        return ExitCode.INPUT_ERROR
    except Exception as err:
        return _internal_error(err)


def _internal_error(err: Exception) -> int:
    from gatekeeper.core.redact import redact

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    fd, path = tempfile.mkstemp(prefix=f"gatekeeper-crash-{stamp}-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(redact(traceback.format_exc()))
    first = escape.terminal(redact(str(err)).splitlines()[0], newlines=False) if str(err).strip() else ""
    terminal.err(f"gatekeeper: internal error: {type(err).__name__}: {first} (traceback saved in {Path(path)})")
    return ExitCode.INTERNAL_ERROR
