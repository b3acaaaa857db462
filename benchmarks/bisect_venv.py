"""The pip provider's throwaway venvs: what one candidate's environment costs, made three ways.

1. ``python -m venv DIR`` (ensurepip puts a pip into every venv), then that pip installs;
2. ``python -m venv --without-pip DIR``, then the job's pip installs with ``--python DIR/bin/python``;
3. as 2, through ``PipProvider.prepare`` (what bisect does): the job's torch and its requirements
   linked, ``torch==<the job's>`` as a constraint, ``--isolated``.

Each installs the same small wheel (a package that requires torch) from a local ``--find-links``
directory; with 1 and 2 torch is linked the same way as in 3 (otherwise pip would look for a torch
to download). ``--reps`` runs per way, interleaved; medians. Correctness is checked for each way:
the package imports at the version asked, and torch is the job's.

    python benchmarks/bisect_venv.py [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gatekeeper.bisect.providers.base import Candidate  # noqa: E402 - after the path set-up
from gatekeeper.bisect.providers.pip import PipProvider  # noqa: E402
from gatekeeper.core import proc  # noqa: E402
from tests.bisect.builders import gelu_wheels  # noqa: E402

CHECK = "import gkops, torch, sys; print(gkops.__file__, torch.__version__)"


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _check(python: Path, version: str) -> None:
    res = proc.run([str(python), "-c", CHECK], timeout=600)
    assert res.ok, res.stderr
    import torch

    assert res.stdout.split()[1] == torch.__version__, res.stdout


def way(kind: str, work: Path, wheels: Path, provider: PipProvider, n: int) -> float | str:
    """Seconds to a venv with the package installed, or why it could not be made."""
    venv = work / f"{kind}-{n}"
    t0 = time.monotonic()
    if kind == "provider":
        prepared = provider.prepare(Candidate(n, "1.0.1", "1.0.1"), work)
        elapsed = time.monotonic() - t0
        _check(Path(prepared.python[0]), "1.0.1")
        provider.cleanup(prepared)
        return elapsed
    with_pip = kind == "ensurepip"
    made = proc.run([sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), str(venv)], timeout=900)
    assert made.ok, made.stderr
    created = time.monotonic() - t0
    links = provider._linked(work)
    (_site(venv) / "_links.pth").write_text(f"{links}\n")
    pip = (
        [str(venv / "bin" / "python"), "-m", "pip"]
        if with_pip
        else [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    )
    res = proc.run(
        [
            *pip,
            "--isolated",
            "--disable-pip-version-check",
            "install",
            "--quiet",
            "--no-index",
            "--find-links",
            str(wheels),
            "gkops==1.0.1",
        ],
        timeout=900,
    )
    if not res.ok:
        errors = [line for line in res.stderr.splitlines() if line.startswith("ERROR:")]
        return f"venv made in {created:.1f} s, then: {(errors or [res.describe()])[0]}"
    elapsed = time.monotonic() - t0
    _check(venv / "bin" / "python", "1.0.1")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bisect-venv-") as tmp:
        work = Path(tmp)
        wheels = work / "wheels"
        gelu_wheels(wheels, count=2, wrong_from=3)
        provider = PipProvider(package="gkops", find_links=str(wheels))
        times: dict[str, list[float | str]] = {"ensurepip": [], "without-pip": [], "provider": []}
        for n in range(args.reps):
            for kind, values in times.items():
                values.append(way(kind, work, wheels, provider, n))
    load = os.getloadavg()[0]
    print(f"load average {load:.1f}, {os.cpu_count()} cores, {args.reps} runs each\n")
    print("| venv made with | then installed by | median (s) | runs (s) |")
    print("| --- | --- | --- | --- |")
    labels = {
        "ensurepip": ("`python -m venv` (ensurepip)", "the venv's own pip"),
        "without-pip": ("`python -m venv --without-pip`", "the job's pip, `--python`"),
        "provider": ("`PipProvider.prepare` (as 2, links, constraint)", "the job's pip, `--python --isolated`"),
    }
    for kind, values in times.items():
        made, by = labels[kind]
        failed = [v for v in values if isinstance(v, str)]
        if failed:
            print(f"| {made} | {by} | fails | {failed[0]} |")
            continue
        seconds = [float(v) for v in values]
        runs = ", ".join(f"{v:.1f}" for v in seconds)
        print(f"| {made} | {by} | {statistics.median(seconds):.1f} | {runs} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
