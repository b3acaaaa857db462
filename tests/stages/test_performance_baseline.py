from __future__ import annotations

import json
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
    assert check["duration_s"] < 60


@pytest.mark.slow
def test_a_killed_soak_leaves_its_finished_windows(tmp_path: Path) -> None:
    import os
    import sys

    from gatekeeper.core import proc

    path = tmp_path / "soak.jsonl"
    cfg = {"device": "cpu", "batch_size": 2, "warmup": 2, "duration_s": 600, "series_path": str(path)}
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    res = proc.run([sys.executable, "-m", "stages.perf.timing"], timeout=15, env=env, input_text=json.dumps(cfg))
    assert res.timed_out  # killed mid-soak, like a cancelled 24 h job
    points = series.read_series(path)
    assert len(points) >= 2
    assert all(p["throughput"] > 0 for p in points)
