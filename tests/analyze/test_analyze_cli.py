"""gatekeeper analyze end to end: formats, --out, --artifacts evidence, --bundle, exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.contract.stage_report import Check, Environment, StageReport, utc_now, write_stage

ROOT = Path(__file__).resolve().parents[2]
LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
OOM = LOGS / "device_oom__pytorch-175431.log"


def _stage(tmp_path: Path, checks: tuple[Check, ...]) -> Path:
    env = Environment(
        torch_version="2.5.1+rocm6.2",
        python="3.11.9",
        host="ci-runner-7",
        device_kind="rocm",
        hip_version="6.2.41133",
        rocm_version="6.2.4",
        device_name="AMD Instinct MI210",
        device_count=1,
        gfx_arch="gfx90a:sramecc+:xnack-",
    )
    report = StageReport("functional_test", "failed", utc_now(), 1.0, env, checks=checks)
    out = tmp_path / "artifacts"
    write_stage(report, out)
    (out / "functional_test.log").write_text("collected 3 items\n" + "\n".join(c.message for c in checks) + "\n")
    return out


def test_json_output_has_the_contract_fields(tmp_path, capsys):
    assert main(["analyze", str(OOM), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["category"] == "device_oom"
    assert doc["known_issue"] == "device-out-of-memory"
    assert doc["confidence"] == 0.9
    first = doc["matches"][0]
    assert first["line"] == 10
    assert first["rule"] == "device-out-of-memory"
    assert "HIP out of memory" in first["text"]
    assert len(first["context"]["before"]) == 2
    assert any("PYTORCH_HIP_ALLOC_CONF=expandable_segments:True" in step for step in doc["remediation"])


@pytest.mark.parametrize(("fmt", "needle"), [("md", "### Failure analysis: device_oom"), ("text", "failure analysis:")])
def test_markdown_and_text(tmp_path, fmt, needle):
    out = tmp_path / "analysis.out"
    assert main(["analyze", str(OOM), "--format", fmt, "--out", str(out)]) == 0
    text = out.read_text()
    assert needle in text
    assert "expandable_segments" in text
    assert not list(tmp_path.glob(".*tmp"))


def test_stdin(monkeypatch, capsys):
    data = b"ERROR: Job failed: execution took longer than 1h0m0s seconds\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    assert main(["analyze", "-", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["category"] == "infra_error"


def test_missing_log_is_exit_2_with_one_line(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "nope.log")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gatekeeper: {tmp_path / 'nope.log'}: log file not found; hint: check the path"]


def test_artifacts_give_environment_and_failed_checks_as_evidence(tmp_path, capsys):
    checks = (
        Check("conv2d_float16", "failed", "AssertionError: Tensor-likes are not close!\nMismatched elements: 3 / 64"),
        Check("matmul", "passed", ""),
    )
    art = _stage(tmp_path, checks)
    (art / "functional_test.log").write_text("all quiet\n")  # the evidence is only in the check
    assert main(["analyze", "--artifacts", str(art), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["category"] == "numerical_mismatch"
    assert doc["environment"]["gfx_arch"] == "gfx90a:sramecc+:xnack-"
    assert doc["environment"]["rocm_version"] == "6.2.4"
    assert doc["failed_checks"] == [
        {"stage": "functional_test", "name": "conv2d_float16", "status": "failed", "message": checks[0].message}
    ]
    assert doc["matches"][0]["source"] == "functional_test.json#conv2d_float16"
    assert any("gfx90a" in step and "{gfx_arch}" not in step for step in doc["remediation"])


def test_repo_known_issue_and_waiver_are_reported(tmp_path, capsys):
    ki = tmp_path / "known-issues.yaml"
    ki.write_text(
        "issues:\n"
        "  - id: mi210-conv-fp16-tolerance\n"
        "    category: numerical_mismatch\n"
        "    priority: 60\n"
        "    patterns: ['conv2d_float16']\n"
        "    explanation: fp16 conv on MI210 differs by one ulp (ROCm/MIOpen#0000).\n"
        "    remediation: [Covered by the waiver until MIOpen ships the fix]\n"
        "    waiver: precision\n"
    )
    log = tmp_path / "job.log"
    log.write_text("FAILED test_ops.py::test_conv2d_float16 - AssertionError: Tensor-likes are not close!\n")
    assert main(["analyze", str(log), "--known-issues", str(ki), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["known_issue"], doc["waiver"], doc["rule_source"]) == (
        "mi210-conv-fp16-tolerance",
        "precision",
        str(ki),
    )


@pytest.mark.slow
def test_unknown_failure_writes_a_runnable_bundle(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GATEKEEPER_TEST_TOKEN", "s3cr3t-value-123")
    details = {"op": "aten.add.Tensor", "shapes": [[2, 3], [2, 3]], "dtypes": ["float32", "float32"], "seed": 7}
    art = _stage(tmp_path, (Check("add_float32", "error", "ValueError: frobnicator exploded", details=details),))
    bundle = tmp_path / "bundle"
    assert main(["analyze", "--artifacts", str(art), "--bundle", str(bundle), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["category"] == "unknown"
    assert doc["bundle"] == str(bundle)
    names = sorted(p.name for p in bundle.iterdir())
    assert names == [
        "README.txt",
        "analysis.json",
        "cases.json",
        "doctor-capture",
        "environment.txt",
        "log-excerpt.txt",
        "repro.py",
    ]
    assert "gatekeeper doctor" in (bundle / "environment.txt").read_text()
    assert json.loads((bundle / "cases.json").read_text())[0]["seed"] == 7
    assert "frobnicator exploded" in (bundle / "log-excerpt.txt").read_text()
    assert "s3cr3t-value-123" not in "".join(p.read_text() for p in bundle.rglob("*") if p.is_file())
    run = subprocess.run(
        [sys.executable, "repro.py"], cwd=bundle, check=False, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "functional_test/add_float32: aten.add.Tensor max abs error vs CPU float64" in run.stdout


def test_known_failure_writes_no_bundle(tmp_path):
    bundle = tmp_path / "bundle"
    assert main(["analyze", str(OOM), "--bundle", str(bundle), "--out", str(tmp_path / "a.txt")]) == 0
    assert not bundle.exists()


def test_script_wrapper(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "analyze_rocm_failure.py"), str(OOM), "--format", "json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["category"] == "device_oom"


def test_bundle_without_doctor_captures_redacted_environment(tmp_path, monkeypatch):
    from gatekeeper.analyze import classify_logs
    from gatekeeper.analyze.bundle import write_bundle
    from gatekeeper.analyze.rules import load_rules

    monkeypatch.setenv("GATEKEEPER_TEST_TOKEN", "s3cr3t-value-123")
    log = tmp_path / "job.log"
    log.write_text("Traceback (most recent call last):\nValueError: s3cr3t-value-123 leaked\n")
    diagnosis = classify_logs([log], rules=load_rules())
    write_bundle(tmp_path / "b", diagnosis, capture_environment=False)
    env_text = (tmp_path / "b" / "environment.txt").read_text()
    assert "GATEKEEPER_TEST_TOKEN=[REDACTED]" in env_text
    assert "doctor --capture not requested" in (tmp_path / "b" / "README.txt").read_text()
    assert "s3cr3t-value-123" not in "".join(p.read_text() for p in (tmp_path / "b").iterdir())


def test_gates_file_checks_the_named_waiver_and_reports_it(tmp_path, capsys, repo_root):
    import yaml

    gates = yaml.safe_load((repo_root / "gates.yaml").read_text())
    gates["waivers"] = [
        {"gate": "precision", "reason": "MIOpen fp16 conv ulp", "owner": "ml-infra", "expires": "2099-01-31"}
    ]
    gates_path = tmp_path / "gates.yaml"
    gates_path.write_text(yaml.safe_dump(gates))
    ki = tmp_path / "known-issues.yaml"
    ki.write_text(
        "issues:\n"
        "  - id: conv-fp16\n"
        "    category: numerical_mismatch\n"
        "    priority: 60\n"
        "    patterns: ['conv2d_float16']\n"
        "    explanation: fp16 conv differs by one ulp.\n"
        "    remediation: [Wait for the MIOpen fix]\n"
        "    waiver: precision\n"
    )
    log = tmp_path / "job.log"
    log.write_text("FAILED test_conv2d_float16\n")
    args = ["analyze", str(log), "--known-issues", str(ki), "--gates", str(gates_path)]
    assert main([*args, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["waiver_detail"]["owner"] == "ml-infra"
    assert doc["waiver_detail"]["expired"] is False
    assert main([*args, "--format", "text"]) == 0
    assert "gate `precision` is waived (MIOpen fp16 conv ulp; ml-infra, until 2099-01-31)" in capsys.readouterr().out
    ki.write_text(ki.read_text().replace("waiver: precision", "waiver: precisoin"))
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gatekeeper: {ki}:8:13: issues[conv-fp16].waiver: 'precisoin' is not a gate in")


def test_tokens_in_logs_do_not_reach_the_report(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MY_API_TOKEN", "tok-1234567890")
    log = tmp_path / "job.log"
    log.write_text(
        "curl -H 'PRIVATE-TOKEN: glpat-abcdefghij0123456789' https://x\n"
        "echo tok-1234567890\n"
        "RuntimeError: HIP error: out of memory\n"
    )
    assert main(["analyze", str(log), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["category"] == "device_oom"
    assert "glpat-abcdefghij0123456789" not in out
    assert "tok-1234567890" not in out


def test_a_blocked_device_gate_is_diagnosed_from_the_verdict(tmp_path):
    """The gate job's verdict is evidence: a required device that is missing is device_not_available."""
    import datetime as dt
    import json

    from gatekeeper.contract.stage_report import Metric, StageReport, write_stage
    from gatekeeper.evaluate.decide import Inputs, evaluate
    from gatekeeper.evaluate.gates import parse_gates
    from gatekeeper.evaluate.run import write_outputs
    from tests.support.builders import env

    rep = StageReport("verify_hip", "passed", "2026-12-02T00:00:00+00:00", 1.0, env(device_kind="cpu", gfx_arch=None),
                      {"device_available": Metric.of(0.0, "bool", "higher")})  # fmt: skip
    write_stage(rep, tmp_path)
    gates = parse_gates(
        {"version": 1, "gates": {"device-required": {"metric": "verify_hip.device_available", "pass": ">= 1"}}}
    )
    verdict = evaluate(Inputs(gates=gates, reports={"verify_hip": rep}, channel="stable", today=dt.date(2026, 12, 2)))
    write_outputs(verdict, tmp_path)
    out = tmp_path / "analysis.json"
    assert main(["analyze", "--artifacts", str(tmp_path), "--format", "json", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["category"] == "device_not_available"
    assert any(c["name"] == "device-required" for c in doc["failed_checks"])


def test_learned_second_opinion_in_the_output_and_no_model_switches_it_off(capsys):
    log = LOGS / "gpu_hang_or_timeout__therock-pr4459-gfx1150-hipcc-check-hang.log"  # train split, no signature
    assert main(["analyze", str(log), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["category"], out["decided_by"], out["known_issue"]) == ("gpu_hang_or_timeout", "model", None)
    assert out["model"]["probability"] >= out["model"]["threshold"]
    assert main(["analyze", str(log), "--format", "text"]) == 0
    assert "learned second opinion" in capsys.readouterr().out
    assert main(["analyze", str(log), "--format", "json", "--no-model"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["category"], out["decided_by"], out["model"]) == ("unknown", "none", None)
