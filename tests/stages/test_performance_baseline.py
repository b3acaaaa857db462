from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gatekeeper.core.errors import InputError
from stages import performance_baseline as pb
from stages._stage import Recorder
from stages.perf import series, smi
from stages.perf.timing import converged

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "perf"


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), ("30m", 1800), ("24h", 86400), ("1.5h", 5400)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert pb.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "24d", "h", "-3s", "0"])
def test_parse_duration_rejects_nonsense(text: str) -> None:
    with pytest.raises(InputError, match="--duration"):
        pb.parse_duration(text)


def test_warmup_convergence_rule() -> None:
    assert converged([10.0, 10.2, 9.9], [10.5, 10.4, 10.6])
    assert not converged([10.0, 10.2, 9.9], [20.0, 21.0, 19.0])
    assert not converged([], [1.0])


def test_growth_slope_is_per_hour_and_robust_to_start_levels() -> None:
    t = [float(s) for s in range(0, 600, 10)]
    leak = [(t, [100 + 0.01 * s for s in t]), (t, [300 + 0.01 * s for s in t])]  # 0.01 MB/s = 36 MB/h
    slope, lo, hi = series.growth_mb_per_hour(leak)
    assert slope == pytest.approx(36.0, rel=1e-6)
    assert lo <= slope <= hi
    assert series.growth_mb_per_hour([([0.0], [1.0])]) is None


def test_decay_and_torn_series(tmp_path: Path) -> None:
    assert series.decay([100.0] * 10 + [90.0] * 10, fraction=0.25) == pytest.approx(0.1)
    assert series.decay([1.0]) is None
    path = tmp_path / "s.jsonl"
    path.write_text('{"t_s": 1, "throughput": 5}\n{"t_s": 2, "throughput": 6}\n{"t_s": 3, "thr', encoding="utf-8")
    assert [p["t_s"] for p in series.read_series(path)] == [1, 2]  # a killed writer's torn line is skipped
    assert series.read_series(tmp_path / "missing.jsonl") == []


def test_rocm_smi_json_parses_real_output() -> None:
    text = (FIXTURES / "rocm-smi__systeminformation-960-json-780m.txt").read_text(encoding="utf-8")
    assert smi.parse_rocm_smi_json(text) == [{"sclk_mhz": 800.0, "temperature_c": 31.0}]
    assert smi.parse_nvidia_smi("1980, 45\n210, [N/A]\n") == [
        {"sclk_mhz": 1980.0, "temperature_c": 45.0},
        {"sclk_mhz": 210.0, "temperature_c": None},
    ]
    rows, reason = smi.read_clocks("cpu")
    assert rows is None
    assert reason.startswith("no GPU")


def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert pb.main(["--out", str(tmp_path), "--processes", "0"]) == 2
    assert "--processes: must be at least 1" in capsys.readouterr().err


def test_short_runs_do_not_extrapolate_memory_growth(tmp_path: Path) -> None:
    class Ctx:
        rec = Recorder("performance_baseline")

    pb._record_growth(Ctx, (120.0, 110.0, 130.0), "over the timed iterations", 2.3)
    assert "memory_growth_mb_per_hour.ci_low" not in Ctx.rec.metrics
    check = Ctx.rec.checks[-1]
    assert check.status == "skipped"
    assert "observed 2.3 s" in check.message
    pb._record_growth(Ctx, (120.0, 110.0, 130.0), "over the soak run", 3600.0)
    assert Ctx.rec.metrics["memory_growth_mb_per_hour.ci_low"].value == 110.0


@pytest.mark.slow
def test_stage_runs_on_cpu_with_demo_model_and_soak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A 2 s soak is far too short to extrapolate memory to MB/hour; allow it here to see the metrics.
    monkeypatch.setattr(pb, "MIN_GROWTH_WINDOW_S", 0.5)
    argv = ["--out", str(tmp_path), "--device", "cpu", "--batch-size", "2", "--processes", "2", "--iterations", "6"]
    assert pb.main([*argv, "--warmup", "2", "--duration", "2s"]) == 0
    doc = json.loads((tmp_path / "performance_baseline.json").read_text(encoding="utf-8"))
    m = doc["metrics"]
    lat = m["latency_ms"]
    assert len(lat["samples"]) == 2
    assert all(len(g) == 6 for g in lat["samples"])
    assert lat["better"] == "lower"
    assert m["latency_ms.p50"]["value"] <= m["latency_ms.p99"]["value"] <= m["latency_ms.p999"]["value"]
    assert m["throughput"]["better"] == "higher"
    assert len(m["throughput"]["samples"]) == 2
    assert m["warmup_converged"]["value"] in (0.0, 1.0)
    assert m["peak_memory_mb"]["value"] > 10
    for name in ("throughput_cv", "memory_growth_mb_per_hour", "throughput_decay"):
        assert name in m
    assert m["memory_growth_mb_per_hour.ci_low"]["value"] <= m["memory_growth_mb_per_hour.ci_high"]["value"]
    checks = {c["name"]: c["status"] for c in doc["checks"]}
    assert checks["process.1"] == "passed"
    assert "passed" in {checks.get("memory_growth"), checks.get("memory_growth#2")}
    assert checks["clocks_and_temperature"] == "skipped"
    lines = (tmp_path / pb.SERIES_FILE).read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 2
    assert all("throughput" in json.loads(line) for line in lines)
    assert doc["summary"]["processes"][0]["reason"].startswith("no GPU")


@pytest.mark.slow
def test_a_crashing_model_is_a_failed_check_not_a_dead_stage(tmp_path: Path) -> None:
    argv = ["--out", str(tmp_path), "--device", "cpu", "--model", "math:sqrt", "--processes", "1"]
    assert pb.main([*argv, "--iterations", "2", "--warmup", "0"]) == 1
    doc = json.loads((tmp_path / "performance_baseline.json").read_text(encoding="utf-8"))
    check = next(c for c in doc["checks"] if c["name"] == "process.1")
    assert check["status"] == "failed"
    assert "exited with code 1" in check["message"]
    assert "TypeError" in check["message"]


@pytest.mark.slow
def test_a_hanging_process_is_killed_after_the_check_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "hangmodel.py").write_text("import time\n\ndef build():\n    time.sleep(600)\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    out = tmp_path / "out"
    argv = ["--out", str(out), "--device", "cpu", "--model", "hangmodel:build", "--processes", "1"]
    assert pb.main([*argv, "--check-timeout", "4", "--iterations", "2"]) == 1
    doc = json.loads((out / "performance_baseline.json").read_text(encoding="utf-8"))
    check = next(c for c in doc["checks"] if c["name"] == "process.1")
    assert check["status"] == "failed"
    assert "timed out after 4 s" in check["message"]


@pytest.mark.slow
def test_a_killed_soak_leaves_its_finished_windows(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "soak.jsonl"
    # 100 s: windows of 0.5 s (duration / 200); the kill comes after the second one, long before the end
    cfg = {"device": "cpu", "batch_size": 2, "warmup": 2, "duration_s": 100, "series_path": str(path)}
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    # Started directly (not through proc.run) so the test can kill it at an event: once two windows are on disk.
    child = subprocess.Popen(
        [sys.executable, "-m", "stages.perf.timing"], stdin=subprocess.PIPE, env=env, start_new_session=True
    )
    try:
        assert child.stdin is not None
        child.stdin.write(json.dumps(cfg).encode())
        child.stdin.close()
        # Poll for the event, however loaded the machine; pytest-timeout ends a soak that never writes.
        while not (path.exists() and path.read_bytes().count(b"\n") >= 2):
            assert child.poll() is None, f"the soak ended before writing two windows (exit {child.returncode})"
            time.sleep(0.05)
        assert child.poll() is None  # still soaking: the kill below lands mid-soak
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # like a cancelled 24 h job: no chance to clean up
        child.wait()
    assert child.returncode == -signal.SIGKILL
    points = series.read_series(path)
    assert len(points) >= 2
    assert all(p["throughput"] > 0 for p in points)


# ---------------------------------------------------------------- sweeps (issue 17)


def test_sweep_axes_points_and_child_configs() -> None:
    from stages.perf import sweep

    axes = sweep.parse_sweep(["batch_size=1,08,64", "dtype=float32,int8", "input_shape=224,3x64x64", "mode=train"])
    assert [(a.key, a.values) for a in axes] == [
        ("batch_size", ("1", "8", "64")),
        ("dtype", ("float32", "int8")),
        ("input_shape", ("224", "3x64x64")),
        ("mode", ("train",)),
    ]
    points = sweep.points(axes)
    assert len(points) == 12
    assert points[0] == {"batch_size": "1", "dtype": "float32", "input_shape": "224", "mode": "train"}
    assert points[-1]["batch_size"] == "64"  # the first axis is the slowest: a budget cuts the last values
    base = {"batch_size": 8, "input_shape": None, "backward": False, "device": "cpu"}
    cfg = sweep.child_config(base, points[0])
    assert (cfg["batch_size"], cfg["dtype"], cfg["resolution"], cfg["backward"]) == (1, "float32", 224, True)
    assert sweep.child_config(base, {"input_shape": "3x64x64"})["input_shape"] == "3,64,64"
    assert sweep.child_config(base, {"mode": "forward"})["backward"] is False
    assert base["batch_size"] == 8  # not modified


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (["batch"], "is not KEY=V1,V2"),
        (["colour=red"], "unknown key 'colour'"),
        (["batch_size=0"], "not a positive integer"),
        (["batch_size=2,x"], "not a positive integer"),
        (["dtype=float8"], "dtype 'float8'"),
        (["mode=eval"], "mode 'eval'"),
        (["input_shape=3xax2"], "neither a resolution nor a shape"),
        (["batch_size=1,1"], "repeats a value"),
        (["batch_size=1", "batch_size=2"], "swept twice"),
    ],
)
def test_bad_sweeps_are_one_clear_line(spec: list[str], fragment: str) -> None:
    from stages.perf import sweep

    with pytest.raises(InputError, match="--sweep") as err:
        sweep.parse_sweep(spec)
    assert fragment in err.value.line()


def test_bad_sweep_options_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert pb.main(["--out", str(tmp_path), "--device", "cpu", "--sweep", "dtype=float8"]) == 2
    assert "--sweep" in capsys.readouterr().err
    assert pb.main(["--out", str(tmp_path), "--device", "cpu", "--sweep-budget", "10m"]) == 2
    assert "no --sweep was given" in capsys.readouterr().err
    assert pb.main(["--out", str(tmp_path), "--device", "cpu", "--sweep", "mode=train", "--sweep-budget", "soon"]) == 2
    assert "--sweep-budget" in capsys.readouterr().err


def test_int8_is_skipped_with_the_reason_where_the_device_has_no_kernels() -> None:
    from stages.perf import sweep

    assert sweep.unsupported({"dtype": "int8"}, "cpu") is None
    assert "CPU kernels only; this device is rocm" in sweep.unsupported({"dtype": "int8"}, "rocm")
    assert "CPU kernels only; this device is cuda" in sweep.unsupported({"dtype": "int8"}, "cuda")
    assert "inference-only" in sweep.unsupported({"dtype": "int8", "backward": True}, "cpu")
    assert sweep.unsupported({"dtype": "bfloat16", "backward": True}, "rocm") is None


def test_point_variants_set_dtype_resolution_and_quantize_linear_layers() -> None:
    import torch

    from stages.models import demo_model
    from stages.perf import variant

    x = torch.randn(2, 3, 32, 32)
    m, y = variant.apply(demo_model(), x, {"resolution": 16, "dtype": "bfloat16"}, torch)
    assert y.shape == (2, 3, 16, 16)
    assert y.dtype == torch.bfloat16
    assert next(m.parameters()).dtype == torch.bfloat16
    q, y = variant.apply(demo_model().eval(), x, {"dtype": "int8"}, torch)
    kinds = {type(mod).__name__ for mod in q.modules()}
    assert "Linear" in kinds
    assert any(type(mod).__module__.startswith("torch.ao.nn.quantized.dynamic") for mod in q.modules())
    with torch.inference_mode():
        assert q(y).shape == (2, 10)  # runs (the transformer fast path is off for quantized layers)
    with pytest.raises(variant.Unsupported, match=r"no nn\.Linear"):
        variant.apply(torch.nn.Conv2d(3, 4, 3), x, {"dtype": "int8"}, torch)
    with pytest.raises(ValueError, match="height and width of an image batch"):
        variant.apply(torch.nn.Linear(4, 4), torch.randn(2, 4), {"resolution": 224}, torch)


@pytest.mark.slow
def test_a_2x2_sweep_gives_four_points_judged_by_a_star_gate(tmp_path: Path) -> None:
    import datetime as dt

    from gatekeeper.contract.stage_report import read_artifacts
    from gatekeeper.evaluate.decide import Inputs, evaluate
    from gatekeeper.evaluate.gates import load_gates, parse_gates

    argv = ["--out", str(tmp_path), "--device", "cpu", "--processes", "2", "--iterations", "4", "--warmup", "1"]
    assert pb.main([*argv, "--sweep", "batch_size=1,2", "--sweep", "dtype=float32,int8"]) == 0
    doc = json.loads((tmp_path / "performance_baseline.json").read_text(encoding="utf-8"))
    m = doc["metrics"]
    labels = [f"[batch_size={b},dtype={d}]" for b in (1, 2) for d in ("float32", "int8")]
    for label in labels:
        assert m[f"latency_ms{label}"]["value"] > 0
        assert len(m[f"latency_ms{label}"]["samples"]) == 2  # per process, for the judge
        assert m[f"throughput{label}"]["better"] == "higher"
        assert m[f"peak_memory_mb{label}"]["value"] > 10
        assert f"latency_ms{label}.p99" in m
    assert "latency_ms" not in m  # a sweep measures its points, not the single run
    assert doc["config"]["sweep"] == {"batch_size": ["1", "2"], "dtype": ["float32", "int8"]}  # for comparability
    assert [p["status"] for p in doc["summary"]["sweep"]["points"]] == ["measured"] * 4
    checks = {c["name"]: c["status"] for c in doc["checks"]}
    assert checks["point[batch_size=2,dtype=int8].process.2"] == "passed"

    reports = read_artifacts(tmp_path)
    g = parse_gates(
        {"version": 1, "gates": {"lat": {"metric": "performance_baseline.latency_ms[*]", "pass": "<= 1e6"}}}
    )
    v = evaluate(Inputs(gates=g, reports=reports, channel="stable", today=dt.date(2026, 12, 3)))
    assert sorted(r.name for r in v.gates) == sorted(f"lat{label}" for label in labels)
    assert v.result == "pass"
    # the default gates: the sweep-latency gate has no baseline here, so it is skipped with the reason
    defaults = load_gates(Path(__file__).resolve().parents[2] / "gates.yaml")
    v = evaluate(Inputs(gates=defaults, reports=reports, channel="stable", today=dt.date(2026, 12, 3)))
    sweep_latency = [r for r in v.gates if r.name.startswith("sweep-latency[")]
    assert len(sweep_latency) == 4
    assert all(r.outcome.value == "skipped" and "no comparable baseline" in r.reason for r in sweep_latency)


@pytest.mark.slow
def test_a_sweep_budget_skips_the_points_it_does_not_reach(tmp_path: Path) -> None:
    argv = ["--out", str(tmp_path), "--device", "cpu", "--processes", "1", "--iterations", "2", "--warmup", "1"]
    assert pb.main([*argv, "--sweep", "input_shape=16,24", "--sweep-budget", "1s"]) == 0
    doc = json.loads((tmp_path / "performance_baseline.json").read_text(encoding="utf-8"))
    first, second = doc["summary"]["sweep"]["points"]
    assert first["status"] == "measured"
    assert second["status"] == "skipped"
    assert "sweep budget of 1 s was spent after 1 of 2 points" in second["reason"]
    m = doc["metrics"]
    assert m["latency_ms[input_shape=16]"]["value"] > 0
    assert m["latency_ms[input_shape=24]"]["value"] is None
    assert "sweep budget" in m["latency_ms[input_shape=24]"]["description"]
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["point[input_shape=24]"]["status"] == "skipped"


def test_a_soak_writes_three_windows_even_when_one_window_outlasts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slope (memory growth) and a decay need three points: on a loaded runner one window can outlast the
    whole soak, and the soak then still writes three windows instead of ending with too few for either."""
    from stages.perf import timing

    def slow_step() -> float:
        time.sleep(0.05)
        return 0.05

    monkeypatch.setattr(timing, "_setup", lambda cfg: (slow_step, lambda: 100.0, None))
    monkeypatch.setattr(timing, "_warm_up", lambda step, n: (True, []))
    series = tmp_path / "soak.jsonl"
    out = timing.soak({"duration_s": 0.01, "batch_size": 1, "warmup": 1, "series_path": str(series)})
    assert out["windows"] == timing.MIN_WINDOWS == 3
    assert len(series.read_text(encoding="utf-8").splitlines()) == 3
