"""The attention category: SDPA forced onto one backend per case, against a float64 reference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gatekeeper.cli import main
from stages.functional import attention
from stages.functional.attention import BACKENDS, SHAPES, cases, kernel_backend, long_lengths, run_attention_case
from stages.functional.catalog import MIN_CASES

REPO = Path(__file__).resolve().parents[2]


def test_at_least_twelve_cases_covering_every_backend_and_shape() -> None:
    names = [c.name for c in cases()]
    assert len(names) == len(set(names)) >= MIN_CASES["attention"] == 12
    assert {c.backend for c in cases()} == {"flash", "efficient", "math"} == set(BACKENDS)
    shapes = SHAPES.values()
    assert {s.head_dim for s in shapes} == {64, 128}
    assert any(s.causal for s in shapes)
    assert any(s.padded for s in shapes)
    assert any(s.gqa for s in shapes)
    assert any(s.long for s in shapes)


def test_sequence_lengths_scale_with_the_device() -> None:
    assert max(long_lengths("cpu", "flash")) <= 1024
    assert long_lengths("cuda", "flash") == (8192, 16384, 32768)
    assert min(long_lengths("cuda", "math")) >= 8192


@pytest.mark.parametrize(
    ("ops", "backend"),
    [
        (["_scaled_dot_product_flash_attention_for_cpu", "add"], "flash"),
        (["_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward"], "flash"),
        (["_scaled_dot_product_efficient_attention"], "efficient"),
        (["_scaled_dot_product_cudnn_attention"], "cudnn"),
        (["bmm", "_safe_softmax", "bmm"], "math"),
        (["add"], "unknown"),
    ],
)
def test_the_backend_is_read_from_the_kernels_that_ran(ops: list[str], backend: str) -> None:
    assert kernel_backend(ops) == backend


@pytest.mark.parametrize("shape", ["causal_d128", "gqa_causal_d64", "padded_d64"])
def test_forced_backends_pass_on_cpu_and_record_the_kernel(shape: str) -> None:
    for backend in ("flash", "math"):
        result = run_attention_case(f"attention.{backend}.{shape}", "cpu", ("float32", "bfloat16"), 0)
        assert result["status"] == "passed", result["message"]
        d = result["details"]
        assert d["backend_used"] == [backend]
        assert d["kernels"]
        assert d["dropout_p"] == 0.0
        assert set(d["errors"]) == {"float32", "bfloat16"}
        assert len(d["errors"]["float32"]) == 2  # forward and gradients
        assert max(d["errors"]["float32"]) < 1e-5


def test_the_long_case_compares_sampled_rows_at_the_cpu_length() -> None:
    result = run_attention_case("attention.flash.long_causal_d128", "cpu", ("float32",), 0)
    assert result["status"] == "passed", result["message"]
    assert result["details"]["shape"]["tokens"] == [1024]
    assert "1024 tokens" in result["message"]


def test_a_backend_the_device_lacks_is_a_skip_naming_it() -> None:
    # the memory-efficient kernel has no CPU implementation
    result = run_attention_case("attention.efficient.plain_d64", "cpu", ("float32",), 0)
    assert result["status"] == "skipped"
    assert result["message"].startswith("efficient: not offered on cpu")
    assert result["details"]["errors"] == {}


def test_a_wrong_result_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    real = attention._sdpa

    def off_by_a_bit(*args, **kwargs):
        return real(*args, **kwargs) * 1.001

    monkeypatch.setattr(attention, "_sdpa", off_by_a_bit)
    result = run_attention_case("attention.math.plain_d64", "cpu", ("float32",), 0)
    assert result["status"] == "failed"
    assert "output error" in result["message"]
    assert "gradient error" in result["message"]


def test_a_different_kernel_than_the_forced_one_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attention, "kernel_backend", lambda ops: "math")
    result = run_attention_case("attention.flash.plain_d64", "cpu", ("float32",), 0)
    assert result["status"] == "failed"
    assert "forced flash but math ran" in result["message"]


@pytest.mark.slow
def test_the_stage_reports_the_attention_category_and_the_gate_reads_it(tmp_path: Path) -> None:
    from gatekeeper.contract.stage_report import read_stage

    out = tmp_path / "out"
    args = ["stage", "functional_test", "--device", "cpu", "--out", str(out), "--categories", "attention"]
    args += ["--dtypes", "float32", "--seeds", "1", "--no-traced", "--no-sparse", "--checkpoint-trials", "0"]
    assert main(args) == 0
    report = read_stage(out / "functional_test.json")
    checks = {c.name: c for c in report.checks if c.name.startswith("attention.")}
    assert len(checks) >= 12
    assert {c.status for n, c in checks.items() if ".efficient." in n} == {"skipped"}
    ran = [c for c in checks.values() if c.status == "passed"]
    assert len(ran) == 10
    assert all(c.details["backend_used"] == [c.name.split(".")[1]] for c in ran)
    assert report.metrics["op_pass_rate.attention"].value == 1.0
    assert report.summary["attention"]["backends"]["efficient"]["skipped"] == 5
    assert "## Attention" in (out / "functional_test.md").read_text()
    code = main(["evaluate", "--artifacts", str(out), "--gates", str(REPO / "gates.yaml"), "--out", str(tmp_path)])
    assert code in (0, 1, 3)  # other stages are absent; only the attention gate matters here
    gates = {g["name"]: g for g in json.loads((tmp_path / "verdict.json").read_text())["gates"]}
    assert gates["attention"]["outcome"] == "pass", gates["attention"]
