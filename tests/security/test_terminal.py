"""Principle 6: one terminal writer. Only ``gatekeeper/cli`` writes to the terminal, through ``cli/terminal.py``,
which shows control, C1 and bidi characters as ``\\xNN``; library code returns values and events.

The findings: a failed check's name and message recorded with ``breaker record --artifacts`` reached the
terminal raw through ``breaker check`` and ``breaker status``, and device names in a capture through
``doctor --from``: ESC sequences, OSC 8 links, BEL, C1 0x9b, bidi overrides.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.contract.stage_report import Check, write_stage
from gatekeeper.contract.verdict import GateResult, Outcome, Verdict
from gatekeeper.core.exitcodes import ExitCode
from tests.support.builders import report

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "env"

# Every class of character that changes what a terminal (or a GitLab job log) shows.
HOSTILE = (
    "\x1b[2J\x1b[31mESC\x1b]8;;https://evil.example\x07link\x1b]8;;\x07 BEL\x07 C1\x9b31m RLO\u202eLRI\u2067 CR\rX"
)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _no_raw_controls(text: str) -> None:
    found = sorted({f"U+{ord(c):04X}" for c in RAW.findall(text)})
    assert not found, f"raw control characters reached the terminal: {found}"


def _hostile_failed_stage(tmp_path: Path) -> Path:
    art = tmp_path / "art"
    art.mkdir()
    failed = Check(f"conv2d {HOSTILE}", "failed", f"max error 3.0 {HOSTILE}")
    write_stage(report("functional_test", {"op_pass_rate": 0.5}, checks=[failed], status="failed"), art)
    return art


def test_breaker_check_and_status_show_a_recorded_diagnosis_escaped(tmp_path, capsys):
    art, state = _hostile_failed_stage(tmp_path), str(tmp_path / "state")
    for _ in range(3):
        assert main(["breaker", "record", "--channel", "nightly", "--job", "functional_test", "--exit-code", "1",
                     "--state", state, "--artifacts", str(art)]) == ExitCode.PASS  # fmt: skip
    capsys.readouterr()
    code = main(["breaker", "check", "--channel", "nightly", "--job", "functional_test", "--state", state])
    assert code == ExitCode.BREAKER_OPEN
    checked = capsys.readouterr()
    assert main(["breaker", "status", "--state", state]) == ExitCode.PASS
    status = capsys.readouterr()
    for stream in (checked.out, checked.err, status.out, status.err):
        _no_raw_controls(stream)
    shown = checked.err + status.out
    assert "\\x1b[31mESC" in shown
    assert "\\x9b31m" in shown
    assert "\\u202e" in shown
    assert "\\u2067" in shown
    assert len(status.out.strip().splitlines()) == 1  # one breaker, one line: no forged second line


def test_doctor_from_shows_hostile_device_names_escaped(tmp_path, capsys):
    capture = tmp_path / "cap"
    capture.mkdir()
    text = (FIXTURES / "rocminfo__amd-gpu-hello-rx7900xtx-gfx1100.txt").read_text(encoding="utf-8")
    assert "Marketing Name:" in text
    text = re.sub(r"(Marketing Name:\s+)(.*)", lambda m: m.group(1) + "Radeon " + HOSTILE, text)
    (capture / "rocminfo.txt").write_text(text, encoding="utf-8")
    main(["doctor", "--from", str(capture)])
    shown = capsys.readouterr()
    _no_raw_controls(shown.out)
    _no_raw_controls(shown.err)
    assert "\\x1b]8;;https://evil.example\\x07link" in shown.out


def test_argparse_errors_are_escaped_too(capsys):
    # argparse quotes an unknown argument as it is ("unrecognized arguments: ..."), past the writer's functions
    assert main(["evaluate", f"x{HOSTILE}"]) == ExitCode.INPUT_ERROR
    shown = capsys.readouterr()
    _no_raw_controls(shown.err)
    assert "\\x1b[31mESC" in shown.err


def test_the_writer_escapes_and_keeps_json_valid(capsys):
    import json

    from gatekeeper.cli import terminal

    terminal.out(f"a {HOSTILE}\tb\nc")
    terminal.err(HOSTILE)
    terminal.out_json({"name": HOSTILE + "\x7f"}, indent=None)
    terminal.out_json_text(json.dumps({"name": HOSTILE}, ensure_ascii=False), indent=None)
    shown = capsys.readouterr()
    _no_raw_controls(shown.out)
    _no_raw_controls(shown.err)
    assert "\tb\nc" in shown.out  # tab and newline are kept
    docs = [json.loads(line) for line in shown.out.splitlines() if line.startswith("{")]
    assert docs == [{"name": HOSTILE + "\x7f"}, {"name": HOSTILE}]


# ------------------------------------------------------------------ nothing outside gatekeeper/cli prints

# Scripts embedded as string constants are run in another process, not by gatekeeper: the AST sees them as
# strings. Each is named here with what it prints, and checked below.
EMBEDDED_SCRIPTS = {
    "gatekeeper/machine/snapshot.py": "the torch probe run in a child process: one JSON line the parent captures",
    "gatekeeper/analyze/bundle.py": "repro.py, written for a person to run: input text only through shown() (ascii)",
}
# A logger handed to a library so that it never writes (its level above CRITICAL), with why.
SILENCED_LOGGERS = {
    "gatekeeper/notify/slack.py": "slack_sdk logs request details; its logger is silenced so no webhook URL is printed",
}


def _writes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("print", "input"):
            found.append((node.lineno, f"{node.func.id}()"))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys":
            if node.attr in ("stdout", "stderr", "__stdout__", "__stderr__"):
                found.append((node.lineno, f"sys.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            found += [
                (node.lineno, f"from sys import {a.name}") for a in node.names if a.name.startswith(("std", "__std"))
            ]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            found += [(node.lineno, "logging") for n in names if n and n.split(".")[0] in ("logging", "faulthandler")]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value
            if node.func.attr == "write" and isinstance(target, ast.Name) and target.id == "os":
                found.append((node.lineno, "os.write()"))
            if node.func.attr in ("print_exc", "print_exception", "print_stack", "warn"):
                found.append((node.lineno, f"{node.func.attr}()"))
    return found


def _flush_only(tree: ast.AST) -> set[int]:
    """Lines of ``sys.stdout.flush()``/``sys.stderr.flush()``: emptying Python's buffer before a child process
    writes to the same terminal is no write (core/proc.py)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "flush":
            inner = node.func.value
            if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and inner.value.id == "sys":
                lines.add(node.lineno)
    return lines


def test_nothing_outside_the_cli_writes_to_the_terminal():
    offenders = []
    for path in sorted((REPO / "gatekeeper").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("gatekeeper/cli/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        flushes = _flush_only(tree)
        for line, what in _writes(tree):
            if what == "logging" and rel in SILENCED_LOGGERS:
                continue
            if what.startswith("sys.std") and line in flushes:
                continue
            offenders.append(f"{rel}:{line}: {what}")
    assert not offenders, "library code writes to the terminal (return values or take a log callback):\n" + "\n".join(
        offenders
    )


def test_the_scan_finds_each_way_of_printing(tmp_path):
    """The scan itself: each form it must catch, planted once."""
    planted = {
        "print('x')": "print()",
        "import sys\nsys.stderr.write('x')": "sys.stderr",
        "import sys\nout = sys.stdout": "sys.stdout",
        "from sys import stderr": "from sys import stderr",
        "import logging\nlogging.warning('x')": "logging",
        "import os\nos.write(2, b'x')": "os.write()",
        "import traceback\ntraceback.print_exc()": "print_exc()",
    }
    for source, what in planted.items():
        assert what in [w for _, w in _writes(ast.parse(source))], source
    assert not _writes(ast.parse("text = 'print(1)'\nlog('x')"))  # a string is not code; a callback is fine


def test_the_embedded_scripts_print_what_they_say():
    from gatekeeper.analyze.bundle import repro_script
    from gatekeeper.machine import snapshot

    probe = snapshot._TORCH_PROBE
    assert probe.count("print(") == 1  # one JSON line after its marker, parsed by the parent
    assert 'print("gatekeeper-torch-probe: " + json.dumps(out))' in probe
    script = repro_script()
    assert "def shown(text):\n    return ascii(str(text))" in script
    for call in re.findall(r"print\(f\"(.*)\"\)", script):
        for value in re.findall(r"\{([^}]*)\}", call):
            # case['op'] passed refusal() (aten.* or a listed torch function); the rest are numbers or fixed words
            assert value.startswith(
                ("shown(", "check", "reason", "case['op']", "err:", "type(exc)", "torch.", "device")
            )
    for rel in EMBEDDED_SCRIPTS:
        assert (REPO / rel).is_file()


# ------------------------------------------------------------------ the verdict for a terminal


def _verdict() -> Verdict:
    long_reason = "P99 14.2 ms is 29.1% above the baseline 11.0 ms (rule <= +20%); " * 4
    gates = (
        GateResult("p99-latency", Outcome.FAIL, long_reason, "performance_baseline.latency_ms.p99", value=14.2,
                   unit="ms", rule="<= +20%", baseline_value=11.0, change=0.291),
        GateResult("operator-coverage", Outcome.PASS, "98.7% of ops pass", "functional_test.op_pass_rate",
                   value=0.987, unit="ratio", rule=">= 0.95"),
        GateResult("memory-growth (" + "x" * 80 + ")", Outcome.WARN, f"advisory {HOSTILE}", "m",
                   severity="advisory", value=31.0, unit="MB/h", rule="<= 50"),
    )  # fmt: skip
    return Verdict(
        result="blocked",
        summary="1 blocking gate failed: p99-latency.",
        channel="stable",
        gates=gates,
        environment={"torch_version": "2.13.0", "device_kind": "cpu", "device_name": "x86_64"},
        warnings=("a baseline record was skipped",),
    )


@pytest.mark.parametrize("width", [60, 100, 200])
def test_the_terminal_verdict_fits_the_width_and_puts_reasons_below(width):
    from gatekeeper.cli.terminal import verdict_table

    text = verdict_table(_verdict(), width=width)
    _no_raw_controls(text)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    assert not any(line.startswith("|") for line in lines)  # no markdown table
    assert "\\(" not in text  # no markdown escapes
    assert "\\%" not in text
    head = next(i for i, line in enumerate(lines) if line.startswith("gate "))
    why = lines.index("why:")
    assert head < why
    table = lines[head:why]
    assert table[1].startswith("p99-latency")  # blocking first
    assert "FAIL (blocks)" in table[1]  # the outcome is never cut
    below = "\n".join(lines[why:])
    assert "p99-latency: P99 14.2 ms" in below
    assert "memory-growth" in below
    assert "operator-coverage" not in below  # a pass needs no reason
    assert "warning: a baseline record was skipped" in below


def test_the_pipeline_shows_the_terminal_table_not_the_markdown(tmp_path, capsys, monkeypatch):
    import gatekeeper.run.pipeline as pipeline

    monkeypatch.setattr(pipeline, "run_pipeline", lambda options, log: _verdict())
    monkeypatch.setenv("COLUMNS", "90")
    code = main(["pipeline", "--out", str(tmp_path), "--gates", str(REPO / "gates.yaml")])
    shown = capsys.readouterr()
    assert code == ExitCode.BLOCKED
    assert "why:" in shown.out
    assert "| gate |" not in shown.out
    assert max(len(line) for line in shown.out.splitlines()) <= 90
    assert "BLOCKED" in shown.err  # the banner


# ------------------------------------------------------------------ one line per line of a job log

FORGED = "\ngatekeeper: blocking gate gpu-verified: device_oom on environment.device_kind (GPU memory exhausted)\n"
COUNT_GATE = "version: 1\ngates:\n  func-checks:\n    metric: functional_test.checks.failed\n    pass: '== 0'\n"


def test_a_newline_in_a_checks_name_forges_no_line_of_the_job_log(tmp_path, capsys):
    """2026-12-04 audit, second pass: evaluate's banner and analyze's text escaped control characters but kept
    newlines; a count gate's reason names the failing checks, whose names the code under test writes, so a check
    named ``conv2d\\ngatekeeper: blocking gate ...: device_oom on ...`` put a line in the job log that
    ``gatekeeper analyze`` read as gatekeeper's own (a second category, "also seen", the confidence lowered).
    Every line is escaped on its own (``escape.terminal_lines``)."""
    import json

    art = tmp_path / "art"
    art.mkdir()
    failed = Check("conv2d" + FORGED, "failed", "max error 3.0" + FORGED)
    write_stage(report("functional_test", {"op_pass_rate": 0.5}, checks=[failed], status="failed"), art)
    (tmp_path / "gates.yaml").write_text(COUNT_GATE, encoding="utf-8")
    argv = ["evaluate", "--artifacts", str(art), "--gates", str(tmp_path / "gates.yaml"), "--out", str(tmp_path / "o")]
    assert main(argv) == ExitCode.BLOCKED
    shown = capsys.readouterr()
    log = shown.out + shown.err
    assert "conv2d\\x0agatekeeper: blocking gate gpu-verified" in log  # shown, inside its own line
    assert not [line for line in log.splitlines() if line.startswith("gatekeeper: blocking gate gpu-verified")]
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    # the log alone (with --artifacts analyze scans the checks' messages too, which are the code under test's to
    # write, as any log line it prints)
    assert main(["analyze", str(tmp_path / "job.log"), "--format", "json"]) == 0
    diagnosis = json.loads(capsys.readouterr().out)
    assert diagnosis["category"] == "configuration_error"
    assert not diagnosis["also_seen"], diagnosis["also_seen"]
    assert main(["analyze", str(tmp_path / "job.log"), "--artifacts", str(art), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "functional_test/conv2d\\x0agatekeeper: blocking gate" in text
    assert not [line for line in text.splitlines() if line.startswith("gatekeeper: blocking gate gpu-verified")]


def test_doctor_from_a_torch_version_with_a_newline_forges_no_summary_line(tmp_path, capsys):
    """2026-12-04 audit, second pass: doctor's text kept newlines; a capture's torch.json (someone's paste) with a
    torch version ``2.5.1\\nSummary: ready`` put a second summary line above the real one."""
    import json

    capture = tmp_path / "cap"
    capture.mkdir()
    text = (FIXTURES / "rocminfo__amd-gpu-hello-rx7900xtx-gfx1100.txt").read_text(encoding="utf-8")
    (capture / "rocminfo.txt").write_text(text, encoding="utf-8")
    torch = {"version": "2.5.1\nSummary: ready: 0 error(s), 0 warning(s)", "hip": "6.2.41133", "available": True,
             "arch_list": ["gfx1100"], "devices": []}  # fmt: skip
    (capture / "torch.json").write_text(json.dumps(torch), encoding="utf-8")
    main(["doctor", "--from", str(capture)])
    out = capsys.readouterr().out
    assert len([line for line in out.splitlines() if line.startswith("Summary:")]) == 1, out
    assert "2.5.1\\x0aSummary: ready" in out
