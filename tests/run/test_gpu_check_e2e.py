"""``gatekeeper gpu-check`` end to end on this machine's CPU: the real stages at the small sizes, the CPU
golden, the pipeline's verdict and the one-page summary, nothing replaced.

Three to four minutes here (2026-12-04, other jobs running): the longest single test of the suite, kept
in it because a test left out of ``make test`` is one CI never runs. tests/run/test_gpu_check.py covers
the summary's wording and the size choice with the pipeline replaced."""

from __future__ import annotations

import json
import os
import subprocess  # nosec B404 - runs gatekeeper's own CLI
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_gpu_check_runs_every_stage_on_the_cpu_and_writes_its_summary(tmp_path: Path) -> None:
    out = tmp_path / "gpu_check"
    # run from tmp_path: whatever the stages write by default (the kernel cache) stays out of the checkout
    env = {**os.environ, "PYTHONPATH": str(REPO), "CI": ""}
    run = subprocess.run(  # nosec B603
        [sys.executable, "-m", "gatekeeper", "gpu-check", "--device", "cpu", "--out", str(out),
         "--gates", str(REPO / "gates.yaml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1700, check=False,
    )  # fmt: skip
    printed = run.stdout + run.stderr
    verdict = json.loads((out / "verdict.json").read_text(encoding="utf-8"))
    # no baseline on a first run: "passed with warnings" at best; a block here is a broken flow
    assert run.returncode in (0, 3), printed[-4000:]
    assert verdict["exit_code"] == run.returncode
    page = (out / "gpu_check.txt").read_text(encoding="utf-8")
    assert page in printed  # the page printed is the page written
    lines = page.splitlines()
    assert lines[0].startswith("gatekeeper gpu-check: --device cpu was requested")
    assert lines[0].endswith("it is not a GPU verdict.")
    assert lines[1].startswith("sizes: CPU; convergence: CPU golden in ")
    rows = {line.split()[0]: line.split() for line in lines[3:8] if line.strip()}
    for stage in ("verify_hip", "functional_test", "performance_baseline", "compatibility_check"):
        assert stage in rows, page
        assert (out / f"{stage}.json").is_file()
        assert (out / f"{stage}.junit.xml").is_file()
        assert int(rows[stage][2]) > 0, rows[stage]  # checks passed: each stage really ran
    assert (out / "golden-cpu" / "convergence.json").is_file()
    measured = page.split("\nmeasured\n", 1)[1]
    # the opt-in measurements of the CPU sizes, each on the page with a value or the reason it has none
    assert "matmul TFLOPS" in measured
    assert "load 5/s" in measured
    assert "load 20/s" in measured
    assert "curve distance" in measured
    assert "from the golden" in measured
    assert "stability" in measured
    assert lines[-1].startswith(f"verdict: {verdict['result']} (exit {run.returncode})")
