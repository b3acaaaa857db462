"""The distributed category: collective cases run by a pair of rank processes
(gloo on the CPU; nccl/RCCL when there are two GPUs), under a wall-clock timeout.

gloo gives the rank that skips a collective no error, and the waiting rank
raises only after the process-group timeout (docs/measured.md), so the parent never
waits on the ranks: ``gatekeeper.core.proc.run`` kills the pair after the wall-clock
limit, the case that was in flight is failed with the timeout, and the cases
after it run in a fresh pair.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatekeeper.core import proc

__all__ = ["DistResult", "backend_for", "case_names", "run_distributed"]

WORLD = 2


@dataclass(frozen=True)
class DistResult:
    name: str  # the check name, "distributed.<case>"
    status: str  # passed | failed
    message: str
    duration_s: float


def case_names() -> list[str]:
    from stages.functional.dist_rank import CASES

    return list(CASES)


def backend_for(device: Any) -> tuple[str, list[str], str]:
    """(backend, per-rank torch devices, note) for a ``stages.device.DeviceInfo``."""
    if device.is_gpu and device.count >= WORLD:
        return "nccl", [f"cuda:{r}" for r in range(WORLD)], f"nccl on {WORLD} GPUs"
    if device.is_gpu:
        return "gloo", ["cpu"] * WORLD, f"gloo on CPU tensors: nccl needs {WORLD} GPUs, this machine has {device.count}"
    return "gloo", ["cpu"] * WORLD, "gloo on CPU"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read(path: Path) -> list[dict[str, Any]]:
    import json

    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # a line cut short by a kill
            break
    return rows


def _launch(  # noqa: PLR0917 - the pair's whole configuration
    names: list[str], backend: str, devices: list[str], seed: int, timeout: float, workdir: Path, module: str
) -> tuple[dict[str, list[dict[str, Any]]], list[proc.ProcResult]]:
    port = _free_port()
    root = str(Path(__file__).resolve().parents[2])  # the directory that holds the stages package
    env = {
        **os.environ,
        "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": "1",
    }
    # the ranks' own watchdog ends a case after ``timeout``; this wall clock is the backstop for a
    # rank stuck where no Python thread runs (startup under load: import torch, rendezvous)
    wall = 120.0 + (timeout + 5.0) * len(names)
    results: list[proc.ProcResult | None] = [None] * WORLD

    def rank(r: int) -> None:
        argv = [sys.executable, "-m", module, "--rank", str(r), "--world", str(WORLD)]
        argv += ["--port", str(port), "--backend", backend, "--device", devices[r], "--cases", ",".join(names)]
        argv += ["--seed", str(seed), "--timeout", str(timeout), "--out", str(workdir)]
        results[r] = proc.run(argv, timeout=wall, env=env)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(WORLD)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows: dict[str, list[dict[str, Any]]] = {}
    for r in range(WORLD):
        for row in _read(workdir / f"rank{r}.jsonl"):
            rows.setdefault(row["case"], []).append({**row, "rank": r})
        (workdir / f"rank{r}.jsonl").unlink(missing_ok=True)
    return rows, [x for x in results if x is not None]


def run_distributed(
    device: Any,
    *,
    seed: int = 0,
    timeout: float = 60.0,
    names: list[str] | None = None,
    module: str = "stages.functional.dist_rank",
) -> list[DistResult]:
    """Run every distributed case once in rank pairs; a hang or a crash fails the case in flight.

    ``module`` is the rank program (``python -m module``); tests pass one with extra cases.
    """
    backend, devices, _ = backend_for(device)
    todo = list(names or case_names())
    out: list[DistResult] = []
    with tempfile.TemporaryDirectory(prefix="gk-dist-") as tmp:
        while todo:
            rows, procs = _launch(todo, backend, devices, seed, timeout, Path(tmp), module)
            done, broken = 0, False
            for name in todo:
                got = rows.get(name, [])
                if len(got) < WORLD:
                    break
                failed = [g for g in got if g["status"] != "passed"]
                message = "; ".join(f"rank {g['rank']}: {g['message']}" for g in failed)
                duration = max(g["duration_s"] for g in got)
                out.append(DistResult(f"distributed.{name}", "failed" if failed else "passed", message, duration))
                done += 1
                if any(g.get("broken") for g in got):
                    broken = True  # later rows of this pair ran on a broken process group: rerun them
                    break
            if done == len(todo):
                break
            if broken:
                todo = todo[done:]
                continue
            # the case in flight when a rank hung or died: fail it with what the ranks said, then go on
            stuck = todo[done]
            said = [f"rank {g['rank']}: {g['message'] or g['status']}" for g in rows.get(stuck, [])]
            why = (
                "; ".join(said + [f"rank {r}: {p.describe()}" for r, p in enumerate(procs) if not p.ok]) or "no result"
            )
            tail = next((p.stderr.strip().splitlines()[-1] for p in procs if not p.ok and p.stderr.strip()), "")
            out.append(
                DistResult(f"distributed.{stuck}", "failed", f"{why}" + (f" ({tail[:300]})" if tail else ""), 0.0)
            )
            todo = todo[done + 1 :]
    return out
