"""The command table: each command line loads only its own command's module."""

from __future__ import annotations

import argparse
import subprocess  # nosec B404 - runs this machine's python on gatekeeper
import sys
from pathlib import Path

import pytest

from gatekeeper import cli
from gatekeeper.contract.stage_report import Check, Metric, write_stage
from tests.support.builders import report

ROOT = Path(__file__).resolve().parents[1]


def _choices(parser: argparse.ArgumentParser) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_the_table_is_what_the_modules_register_in_the_help_order() -> None:
    assert _choices(cli.build_parser()) == list(cli.COMMANDS)
    for name in cli.COMMANDS:
        assert _choices(cli.build_parser(only=name)) == [name], name


def test_a_command_line_that_names_no_command_gets_every_command() -> None:
    for first in (None, "--help", "evalute", "-x"):
        assert _choices(cli.build_parser(only=first)) == list(cli.COMMANDS)


@pytest.mark.parametrize("argv", [["evalute"], [], ["--nope"]])
def test_an_unknown_or_missing_command_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "evaluate" in err or "required" in err  # argparse names the choices, or says one is required


# Not loaded by `gatekeeper evaluate` (benchmarks/README.md, "Evaluate over a large JUnit file", has the memory):
# OpenSSL (core/digest.py says why), SQLite without a history store, junitparser and the distribution
# metadata it reads at import (evaluate/outputs.to_junit), html's entity table, the other commands.
NOT_LOADED = (
    "_hashlib",
    "_sqlite3",
    "junitparser",
    "importlib.metadata",
    "html.entities",
    "gatekeeper.cli.bisect",
    "gatekeeper.cli.cache",
    "gatekeeper.kernel_cache.key",
    "gatekeeper.notify",
)

CHILD = """
import json, sys
from gatekeeper import cli
rc = cli.main(["evaluate", "--artifacts", "artifacts", "--out", "out"])
print(json.dumps({"rc": rc, "modules": sorted(sys.modules)}))
"""


def test_evaluate_leaves_the_heavy_modules_unloaded(tmp_path: Path) -> None:
    write_stage(report("functional_test", {"op_pass_rate": 1.0}, [Check("ok", "passed")]), tmp_path / "artifacts")
    write_stage(
        report("performance_baseline", {"latency_ms": Metric.of(20.0, "ms", "lower", [[20.0, 20.1]] * 3)}),
        tmp_path / "artifacts",
    )
    r = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    import json

    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["rc"] in (0, 1, 3), r.stderr  # a verdict was written: the command ran to its end
    assert (tmp_path / "out" / "gates.junit.xml").is_file()
    loaded = set(result["modules"])
    assert "gatekeeper.cli.evaluate" in loaded  # the probe sees what the command imported
    assert sorted(m for m in NOT_LOADED if m in loaded) == []
