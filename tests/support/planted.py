"""The planted failure families of issue 28, run for real on a CPU: a model repository (a copy of
tests/analyze/planted/) and the gatekeeper commands a CI job runs in it.

Each family runs the stage it fails in, then ``gatekeeper evaluate`` with the repository's gates,
into its own artifacts directory; nothing is written by hand. The commands run through the
``gatekeeper`` console script in the repository (the working directory), without PYTHONPATH: the
model is found as a CI job finds it. Used by tests/analyze/test_planted.py and
benchmarks/analyze_accuracy.py (``--planted``).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gatekeeper.core import proc

REPO = Path(__file__).resolve().parents[2]
PLANTED = REPO / "tests" / "analyze" / "planted"

# The functional_test options of a short planted run: only what the family needs.
_SHORT = ["--categories", "none", "--no-sparse", "--checkpoint-trials", "0"]
# 30% slower: every forward sleeps 400 ms, then 520 ms. The sleep dominates the forward, so a
# loaded shared CPU (tens of ms of scheduling delay) stays below the judge's 5% limit on the
# spread of the process medians; at 150 ms it did not, under a parallel test run.
BASE_DELAY_MS, SLOW_DELAY_MS = "400", "520"
_PERF = ["--processes", "5", "--iterations", "6", "--warmup", "1"]


@dataclass(frozen=True)
class Family:
    name: str
    category: str  # what analyze must name
    failing: str  # the failing check (stage/check) or gate (gate NAME) it must name
    what: str


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "wrong_kernel",
            "numerical_mismatch",
            "functional_test/traced.aten::cumsum",
            "a float32 cumsum kernel 2% off, through a torch.library override",
        ),
        Family(
            "model_not_importable",
            "configuration_error",
            "functional_test/stage.config",
            "--model names a module that is not in the repository",
        ),
        Family(
            "device_required_on_cpu",
            "device_not_available",
            "gate device-required",
            "GATEKEEPER_REQUIRE_DEVICE=1 on a runner without a GPU",
        ),
        Family(
            "slower_model",
            "performance_regression",
            "gate latency-median",
            "the model 30% slower than the recorded baseline",
        ),
        Family(
            "hang",
            "gpu_hang_or_timeout",
            "functional_test/user.case_waits_forever",
            "a case that hangs past --check-timeout",
        ),
        Family(
            "segfault",
            "segfault",
            "functional_test/user.case_native_crash",
            "a case whose worker dies by SIGSEGV",
        ),
    )
}


@dataclass
class Planted:
    family: Family
    artifacts: Path
    results: list[proc.ProcResult] = field(default_factory=list)


def make_repo(base: Path) -> Path:
    """A model repository: the planted package at its root, a --cases file and its gates.yaml."""
    repo = base / "model-repo"
    repo.mkdir(parents=True)
    shutil.copytree(PLANTED / "plantedmodels", repo / "plantedmodels", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PLANTED / "cases.py", repo / "cases.py")
    shutil.copy(PLANTED / "gates.yaml", repo / "gates.yaml")
    return repo


def gatekeeper_command() -> list[str]:
    """The console script of this interpreter's environment (it does not put the working directory on
    sys.path, unlike ``python -m``): what a CI job runs."""
    script = Path(sys.executable).parent / "gatekeeper"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "gatekeeper"]


def _env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEKEEPER_", "GK_PLANT"))}
    env.pop("PYTHONPATH", None)
    return {**env, **extra}


def _steps(name: str, out: str, gates: str) -> list[tuple[list[str], dict[str, str]]]:
    stage = ["stage"]
    evaluate = ["evaluate", "--artifacts", out, "--gates", gates, "--out", out]
    if name == "wrong_kernel":
        return [
            ([*stage, "functional_test", "--device", "cpu", "--out", out, "--model", "plantedmodels.wrongkernel:build",
              *_SHORT], {}),
            (evaluate, {}),
        ]  # fmt: skip
    if name == "model_not_importable":
        return [
            ([*stage, "functional_test", "--device", "cpu", "--out", out, "--model", "plantedmodel.models:build",
              *_SHORT], {}),
            (evaluate, {}),
        ]  # fmt: skip
    if name == "device_required_on_cpu":
        need = {"GATEKEEPER_REQUIRE_DEVICE": "1"}
        return [([*stage, "verify_hip", "--device", "auto", "--out", out], need), (evaluate, need)]
    if name == "slower_model":
        # the baseline's run lives beside, not among, the artifacts a diagnose job walks
        base = f"baselines/{Path(out).name}"
        store = f"sqlite:baselines/{Path(out).name}-history.db"
        timing = [*stage, "performance_baseline", "--device", "cpu", "--model", "plantedmodels:build", *_PERF]
        return [
            ([*timing, "--out", base], {"GK_PLANT_DELAY_MS": BASE_DELAY_MS}),
            (["evaluate", "--artifacts", base, "--gates", gates, "--out", base, "--record", store], {}),
            ([*timing, "--out", out], {"GK_PLANT_DELAY_MS": SLOW_DELAY_MS}),
            ([*evaluate, "--baseline", store], {}),
        ]
    if name in ("hang", "segfault"):
        return [
            ([*stage, "functional_test", "--device", "cpu", "--out", out, "--categories", "none", "--no-traced",
              "--no-sparse", "--checkpoint-trials", "0", "--cases", "cases.py", "--check-timeout", "5"],
             {"GK_PLANT": name}),
            (evaluate, {}),
        ]  # fmt: skip
    raise KeyError(name)


def plant(name: str, repo: Path, *, gates: str = "gates.yaml", timeout: float = 600.0) -> Planted:
    """Run family ``name`` in ``repo``; its artifacts go to ``repo/artifacts/<name>``."""
    family = FAMILIES[name]
    out = Path("artifacts") / name
    planted = Planted(family, repo / out)
    for argv, extra in _steps(name, str(out), gates):
        res = proc.run([*gatekeeper_command(), *argv], timeout=timeout, cwd=repo, env=_env(extra))
        planted.results.append(res)
    return planted


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.support.planted [--gates FILE] FAMILY...`` in a model repository (a CI job's)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--gates", default="gates.yaml")
    parser.add_argument("families", nargs="+", choices=sorted(FAMILIES))
    args = parser.parse_args(argv)
    for name in args.families:
        planted = plant(name, Path.cwd(), gates=args.gates)
        codes = ", ".join(str(r.returncode) for r in planted.results)
        print(f"planted {name} ({planted.family.what}): exit codes {codes} -> {planted.artifacts}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
