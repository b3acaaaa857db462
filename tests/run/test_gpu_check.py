"""gatekeeper gpu-check: GPU sizes where torch sees a GPU, small CPU sizes (and a first line that says
so) where it does not, a CPU golden for convergence, and a one-page summary of what ran, what was
measured, what failed and what was skipped and why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gatekeeper.contract.stage_report import Check, Metric, write_stage
from gatekeeper.contract.verdict import GateResult, Outcome, Verdict
from gatekeeper.core.errors import InputError
from gatekeeper.run import gpu_check
from tests.support.builders import report


def _verdict(result: str = "pass", blocking: tuple[str, ...] = ()) -> Verdict:
    gates = tuple(GateResult(name, Outcome.FAIL, "x", "m") for name in blocking)
    return Verdict(result=result, summary="", channel="stable", gates=gates)


def _reports() -> dict[str, Any]:
    verify = report(
        "verify_hip",
        checks=[
            Check("smoke.matmul", "passed"),
            Check("hygiene.pcie_link", "info", "WARNING: PCIe link of 0000:01:00.0 runs below its maximum"),
        ],
    )
    verify = verify.__class__(
        **{
            **verify.__dict__,
            "summary": {
                "pcie": {
                    "link": {
                        "current": {"generation": 4, "width": 8},
                        "max": {"generation": 5, "width": 16},
                        "below_max": True,
                    }
                }
            },
        }
    )
    perf = report(
        "performance_baseline",
        {
            "tflops[dtype=float16,op=matmul]": Metric.of(900.0, "TFLOPS", "higher"),
            "compute_efficiency[dtype=float16,op=matmul]": Metric.of(0.69, "ratio", "higher"),
            "tflops[dtype=int8,op=conv2d]": Metric.of(None, "TOPS", "higher", description="skipped: no int8 conv"),
            "copy_bandwidth_gbps[dir=h2d,pinned=true,size_mb=64]": Metric.of(24.8, "GB/s", "higher"),
        },
        checks=[
            Check("process.1", "passed"),
            Check("copy[dir=h2d,pinned=false,size_mb=1]", "skipped", "no GPU here"),
            Check("copy[dir=d2h,pinned=false,size_mb=1]", "skipped", "no GPU here"),
            Check("load[qps=200]", "failed", "worker killed by signal SIGSEGV"),
        ],
    )
    perf = perf.__class__(
        **{
            **perf.__dict__,
            "summary": {
                "load": {
                    "rates": [
                        {"qps": 50.0, "status": "measured", "p50_ms": 2.1, "p99_ms": 4.5, "achieved_qps": 49.8}
                        | {"timeouts": 0, "errors": 0},
                        {"qps": 200.0, "status": "failed", "reason": "worker killed by signal SIGSEGV"},
                    ]
                }
            },
        }
    )
    func = report(
        "functional_test",
        {
            "convergence_final_loss": Metric.of(0.03, "loss", "lower"),
            "convergence_final_loss_spread": Metric.of(0.01, "loss", "lower"),
            "convergence_curve_distance": Metric.of(0.002, "ratio", "lower"),
            "train_interruptions": Metric.of(1.0, "count", "lower"),
            "train_interruptions[kind=oom]": Metric.of(1.0, "count", "lower"),
            "train_interruptions[kind=hang]": Metric.of(0.0, "count", "lower"),
        },
    )
    return {"verify_hip": verify, "performance_baseline": perf, "functional_test": func}


def test_the_summary_page_says_what_ran_was_measured_failed_and_skipped() -> None:
    text = gpu_check.summarize(
        _reports(),
        _verdict("blocked", ("load-errors",)),
        sizes="gpu",
        device_line="1 GPU(s): AMD Instinct MI300X",
        gpu=True,
        golden="CPU golden in out/golden-cpu",
    )
    lines = text.splitlines()
    assert lines[0] == "gatekeeper gpu-check: 1 GPU(s): AMD Instinct MI300X"
    assert "convergence: CPU golden" in lines[1]
    assert "Gen4 x8 of Gen5 x16 (BELOW ITS MAXIMUM)" in text
    assert "float16 900 (69%)" in text
    assert "h2d 64 MB pinned 24.8" in text
    assert "P99 4.5 ms" in text
    assert "load 200/s" in text
    assert "worker killed by signal SIGSEGV" in text
    assert "curve distance 0.002 from the golden" in text
    assert "1 interruptions (oom 1)" in text
    assert "failed checks (1)" in text
    assert "  2 x performance_baseline: no GPU here" in text  # skips grouped by their reason
    assert lines[-1] == "verdict: blocked (exit 1): load-errors"
    assert len(lines) < 60  # one page


def test_a_cpu_run_says_it_is_not_a_gpu_verdict() -> None:
    text = gpu_check.summarize({}, _verdict(), sizes="cpu", device_line="no GPU: torch sees none", gpu=False)
    assert text.splitlines()[0].endswith("Small CPU sizes: this checks the flow, it is not a GPU verdict.")
    assert "nothing beyond the stage checks" in text


@pytest.mark.parametrize(
    ("seen", "sizes", "want"), [(True, "auto", "gpu"), (False, "auto", "cpu"), (True, "cpu", "cpu")]
)
def test_sizes_follow_the_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seen: bool, sizes: str, want: str
) -> None:
    ran: dict[str, Any] = {}

    def fake_pipeline(options: Any, environ: Any, log: Any = None) -> Verdict:
        ran["stage_args"] = options.stage_args
        for name in ("verify_hip", "functional_test"):
            write_stage(report(name), options.out)
        return _verdict()

    monkeypatch.setattr(gpu_check, "detect_gpu", lambda env: (seen, "1 GPU(s): X" if seen else "no GPU"))
    monkeypatch.setattr(gpu_check, "run_pipeline", fake_pipeline)
    monkeypatch.setattr(gpu_check, "cpu_golden", lambda o, train, env, log=None: (o.out / "golden-cpu", "CPU golden"))
    result = gpu_check.run_gpu_check(gpu_check.GpuCheckOptions(out=tmp_path, sizes=sizes), {})
    assert result.sizes == want
    args = ran["stage_args"]
    table = gpu_check.GPU_ARGS if want == "gpu" else gpu_check.CPU_ARGS
    train = gpu_check.GPU_TRAIN if want == "gpu" else gpu_check.CPU_TRAIN
    assert args["performance_baseline"] == list(table["performance_baseline"])
    for flag in ("--efficiency", "--copy-bandwidth", "--load"):
        assert flag in args["performance_baseline"]
    assert args["functional_test"] == [*table["functional_test"], *train, "--golden", str(tmp_path / "golden-cpu")]
    assert result.summary_path.read_text() == result.summary
    assert f"sizes: {want.upper()}" in result.summary


def test_without_a_golden_convergence_runs_uncompared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: dict[str, Any] = {}

    def fake_pipeline(options: Any, environ: Any, log: Any = None) -> Verdict:
        ran["args"] = options.stage_args["functional_test"]
        return _verdict()

    monkeypatch.setattr(gpu_check, "run_pipeline", fake_pipeline)
    monkeypatch.setattr(
        gpu_check, "cpu_golden", lambda o, train, env, log=None: (None, "no golden: the CPU run failed")
    )
    result = gpu_check.run_gpu_check(gpu_check.GpuCheckOptions(out=tmp_path, device="cpu"), {})
    assert "--golden" not in ran["args"]
    assert "--train-steps" in ran["args"]
    assert "convergence: no golden: the CPU run failed" in result.summary


def test_unknown_sizes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--sizes"):
        gpu_check.run_gpu_check(gpu_check.GpuCheckOptions(out=tmp_path, sizes="huge"), {})


def test_a_gpu_job_without_a_gpu_is_refused_before_any_stage_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pipeline(options: Any, environ: Any, log: Any = None) -> Verdict:
        pytest.fail("a stage ran for a verdict known in advance")

    monkeypatch.setattr(
        gpu_check, "detect_gpu", lambda env: (False, "no GPU: torch 2.13.0+cpu (CPU-only build) sees none")
    )
    monkeypatch.setattr(gpu_check, "run_pipeline", no_pipeline)
    monkeypatch.setattr(gpu_check, "cpu_golden", no_pipeline)
    with pytest.raises(InputError) as err:
        gpu_check.run_gpu_check(gpu_check.GpuCheckOptions(out=tmp_path), {"GATEKEEPER_REQUIRE_DEVICE": "1"})
    assert err.value.line().startswith(
        "<input>:gpu-check: GATEKEEPER_REQUIRE_DEVICE=1 (a GPU job) but no GPU: torch 2.13.0+cpu"
    )
    # without the variable a CPU run checks the flow at the CPU sizes (test_sizes_follow_the_device)


@pytest.mark.slow
def test_gpu_detection_on_this_machine_reports_why_not() -> None:
    import os

    seen, line = gpu_check.detect_gpu(dict(os.environ))
    if not seen:
        assert line.startswith("no GPU: torch ")
