"""stage_main with a small stage module defined in the test: checks, metrics, crash isolation, artifacts."""

from __future__ import annotations

import argparse
import sys
import types
from dataclasses import dataclass

import pytest

from gatekeeper.contract.stage_report import read_stage
from stages._stage import SkipCheck, stage_main
from stages.isolate import Worker


@pytest.fixture
def fake_stage(tmp_path, monkeypatch):
    (tmp_path / "fake_cases_mod.py").write_text("import ctypes\ndef crash():\n    ctypes.string_at(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + ":" + ":".join(sys.path))
    mod = types.ModuleType("fake_stage")
    mod.NAME = "fake_stage"
    mod.DESCRIPTION = "test"

    @dataclass(frozen=True)
    class Options:
        level: int = 1

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--level", type=int, default=1)

    def run(ctx):
        with ctx.rec.group("g", "group"):
            with ctx.rec.check("ok") as h:
                h.message = f"level {ctx.options.level}"
            with ctx.rec.check("bad"):
                raise AssertionError("2 != 3")
            with ctx.rec.check("gpu"):
                raise SkipCheck("no GPU here")
            with ctx.rec.check("broken"):
                raise RuntimeError("oops")
            with Worker() as w:
                ctx.rec.outcome("crash", w.call("fake_cases_mod:crash", timeout=60))
        ctx.rec.metric("rate", 0.5, "ratio", "higher")

    mod.Options, mod.add_arguments, mod.run = Options, add_arguments, run
    return mod


def test_stage_main_records_everything(fake_stage, tmp_path):
    out = tmp_path / "art"
    code = stage_main(fake_stage, ["--device", "cpu", "--out", str(out), "--level", "7"])
    assert code == 1
    rep = read_stage(out / "fake_stage.json")
    status = {c.name: c.status for c in rep.checks}
    assert status == {"ok": "passed", "bad": "failed", "gpu": "skipped", "broken": "error", "crash": "failed"}
    msgs = {c.name: c.message for c in rep.checks}
    assert msgs["ok"] == "level 7"
    assert "SIGSEGV" in msgs["crash"]
    assert rep.config["level"] == 7
    assert rep.metrics["rate"].value == 0.5
    assert rep.status == "failed"
    log = (out / "fake_stage.log").read_text()
    assert "section_start" in log
    assert "[FAIL] bad: 2 != 3" in log
    assert (out / "fake_stage.junit.xml").exists()


def test_bad_option_is_input_error(fake_stage, tmp_path, capsys):
    code = stage_main(fake_stage, ["--device", "cuda", "--out", str(tmp_path)])
    assert code == 2
    assert "torch sees no GPU" in capsys.readouterr().err
