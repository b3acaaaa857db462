"""The real thing: a stage process on this CPU, then evaluate, through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_pipeline_verify_hip_on_cpu(tmp_path):
    out = tmp_path / "artifacts"
    gates = tmp_path / "gates.yaml"
    gates.write_text('version: 1\ngates:\n  device-checks:\n    metric: verify_hip.checks.failed\n    pass: "== 0"\n')
    argv = ["pipeline", "--device", "cpu", "--stages", "verify_hip", "--out", str(out), "--gates", str(gates)]
    r = subprocess.run(
        [sys.executable, "-m", "gatekeeper", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode in (0, 3), r.stdout + r.stderr
    stage = json.loads((out / "verify_hip.json").read_text())
    assert stage["environment"]["device_kind"] == "cpu"
    checks = {c["name"]: c for c in stage["checks"]}
    assert checks["device.visible"]["status"] == "skipped"
    assert "no GPU" in checks["device.visible"]["message"]
    assert checks["smoke.conv2d"]["status"] == "passed"
    assert (out / "verify_hip.log").read_text().count("smoke.matmul") >= 1
    verdict = json.loads((out / "verdict.json").read_text())
    smoke = next(g for g in verdict["gates"] if g["name"] == "device-checks")
    assert smoke["outcome"] == "pass"
    # the verdict as a terminal shows it (cli/terminal.py verdict_table), not verdict.md's markdown
    assert "gatekeeper: PASSED" in r.stdout
    assert any(line.startswith("device-checks") and " pass " in line for line in r.stdout.splitlines())
    assert "| gate |" not in r.stdout


@pytest.mark.slow
def test_stage_that_dies_leaves_an_error_artifact(tmp_path, monkeypatch):
    from gatekeeper.run import pipeline as pl

    monkeypatch.setattr(
        pl,
        "stage_argv",
        lambda name, options: [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
    )
    opts = pl.PipelineOptions(out=tmp_path, gates=REPO / "gates.yaml", stages=("verify_hip",))
    verdict = pl.run_pipeline(opts, environ={})
    stage = json.loads((tmp_path / "verify_hip.json").read_text())
    assert stage["status"] == "error"
    assert "killed by SIGSEGV" in stage["checks"][0]["message"]
    assert verdict.result == "blocked"


def test_quick_arguments_are_accepted_by_each_stage():
    """--quick passes reduced settings; each must be a real option of its stage."""
    import argparse

    from gatekeeper.run.pipeline import QUICK_ARGS
    from stages import STAGES, load_stage
    from stages._stage import build_parser

    for name, args in QUICK_ARGS.items():
        assert name in STAGES
        parser = build_parser(load_stage(name))
        assert isinstance(parser.parse_args(args), argparse.Namespace)


def test_the_pipeline_baseline_drives_performance_baselines_rounds():
    from gatekeeper.run.pipeline import PipelineOptions, stage_argv
    from stages import load_stage
    from stages._stage import build_parser

    opts = PipelineOptions(baseline="sqlite:.gatekeeper/history.db", quick=True)
    argv = stage_argv("performance_baseline", opts)
    assert argv[argv.index("--baseline") + 1] == "sqlite:.gatekeeper/history.db"
    parsed = build_parser(load_stage("performance_baseline")).parse_args(argv[3:])
    assert (parsed.baseline, parsed.max_processes) == ("sqlite:.gatekeeper/history.db", 6)
    assert "--baseline" not in stage_argv("verify_hip", opts)
