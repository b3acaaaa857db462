"""gatekeeper evaluate over a 200,000-case JUnit file (~17 MB) plus four stage
artifacts, side by side with junitparser.JUnitXml.fromfile loading that file alone.

Each side runs in a fresh process; wall time and peak RSS (ru_maxrss) are
reported by the child itself. Run: python benchmarks/evaluate_junit.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = 200_000


def make_junit(path: Path) -> None:
    with path.open("w") as fh:
        fh.write(f'<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="big" tests="{CASES}">\n')
        for i in range(CASES):
            cls = f"tests.pkg{i % 97}.test_module_{i % 1013}"
            if i % 1000 == 7:
                fh.write(
                    f'<testcase classname="{cls}" name="test_case_{i}" time="0.001"><failure message="assert 1 == 2">trace line</failure></testcase>\n'
                )
            elif i % 500 == 3:
                fh.write(
                    f'<testcase classname="{cls}" name="test_case_{i}" time="0.000"><skipped message="no gpu"/></testcase>\n'
                )
            else:
                fh.write(f'<testcase classname="{cls}" name="test_case_{i}" time="0.001"/>\n')
        fh.write("</testsuite></testsuites>\n")


def make_artifacts(art: Path) -> None:
    sys.path.insert(0, str(REPO))
    from gatekeeper.contract.stage_report import Check, Environment, Metric, StageReport, write_stage

    env = Environment("2.13.0+cpu", "3.11", "bench")
    metrics = {
        "verify_hip": {"device_available": Metric.of(0.0, "bool", "higher")},
        "functional_test": {
            "op_pass_rate": Metric.of(0.99, "ratio", "higher"),
            "max_rel_error.float32": Metric.of(1e-6, "ratio", "lower"),
        },
        "performance_baseline": {
            "latency_ms": Metric.of(20.0, "ms", "lower", [[20.0 + j * 0.01 for j in range(200)] for _ in range(10)])
        },
        "compatibility_check": {"onnx_export_rate": Metric.of(1.0, "ratio", "higher")},
    }
    for stage, ms in metrics.items():
        checks = tuple(Check(f"c{i}", "passed") for i in range(200))
        write_stage(StageReport(stage, "passed", "2026-12-02T00:00:00+00:00", 1.0, env, ms, checks), art)


CHILD = textwrap.dedent("""
    import resource, sys, time
    mode, junit, work = sys.argv[1], sys.argv[2], sys.argv[3]
    t = time.perf_counter()
    if mode == "junitparser":
        from junitparser import JUnitXml
        xml = JUnitXml.fromfile(junit)
        n = sum(1 for suite in xml for _case in suite)
    else:
        import os
        os.chdir(work)
        from gatekeeper import cli
        rc = cli.main(["evaluate", "--artifacts", "artifacts", "--gates", "gates.yaml", "--out", "out"])
        assert rc in (0, 1, 3), rc
    wall = time.perf_counter() - t
    print(f"{wall:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
""")


def run(mode: str, junit: Path, work: Path) -> tuple[float, float]:
    r = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(junit), str(work)],
        capture_output=True, text=True, timeout=600, check=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    wall, rss = r.stdout.strip().splitlines()[-1].split()
    return float(wall), float(rss)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        junit = work / "reports" / "big.xml"
        junit.parent.mkdir()
        make_junit(junit)
        make_artifacts(work / "artifacts")
        gates = (
            (REPO / "gates.yaml")
            .read_text()
            .replace(
                "waivers: []",
                "  unit-tests:\n    junit: reports/*.xml\n    metric: pass_rate\n    pass: '>= 0.99'\nwaivers: []",
            )
        )
        (work / "gates.yaml").write_text(gates.replace("\n  unit-tests:", "\n  unit-tests:", 1))
        size_mb = junit.stat().st_size / 1e6
        results = {mode: run(mode, junit, work) for mode in ("junitparser", "evaluate")}
        print(f"JUnit file: {CASES} test cases, {size_mb:.1f} MB")
        print("| what | wall time (s) | peak RSS (MB) |")
        print("| --- | --- | --- |")
        for mode, (wall, rss) in results.items():
            label = (
                "junitparser.JUnitXml.fromfile (load + iterate)"
                if mode == "junitparser"
                else "gatekeeper evaluate (all gates + JUnit gate)"
            )
            print(f"| {label} | {wall:.2f} | {rss:.0f} |")
        verdict = json.loads((work / "out" / "verdict.json").read_text())
        unit = next(g for g in verdict["gates"] if g["name"] == "unit-tests")
        print(f"unit-tests gate: {unit['outcome']}: {unit['reason']}")


if __name__ == "__main__":
    main()
