"""The collectives check: start ``world_size`` rank processes on a free loopback
port, let each run all_reduce, all_gather, broadcast, reduce_scatter and barrier
(``stages.compat.rank``), and read their event files back into one result per
collective. A collective that some rank never joins is a deadlock: it is named
with the missing rank, and every rank process is gone before this returns.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatekeeper.core import proc
from gatekeeper.core.errors import InputError
from stages.compat.bandwidth import BandwidthPoint, interpret
from stages.compat.rank import BANDWIDTH_OPS, COLLECTIVES, WATCHDOG_EXIT

__all__ = ["COLLECTIVES", "CollectiveResult", "CollectivesRun", "parse_plant", "run_collectives"]

# import torch and join the process group: allowed on top of the per-step timeouts before the backstop kill
_STARTUP_ALLOWANCE_S = 120.0


@dataclass(frozen=True)
class CollectiveResult:
    name: str
    status: str  # passed | failed | skipped
    message: str = ""
    duration_s: float = 0.0
    deadlock: bool = False
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CollectivesRun:
    backend: str
    world_size: int
    results: tuple[CollectiveResult, ...]
    elapsed_s: float
    processes_left: int
    rank_exits: tuple[str, ...]
    rank_stderr: tuple[str, ...] = ()  # the last lines each rank printed, for the log when something failed
    bandwidth: tuple[BandwidthPoint, ...] = ()
    bandwidth_problem: str = ""  # why the bandwidth measurement stopped ('' when it finished or was not asked)

    @property
    def deadlocks(self) -> int:
        return sum(r.deadlock for r in self.results)

    def pass_rate(self) -> float | None:
        ran = [r for r in self.results if r.status != "skipped"]
        return sum(r.status == "passed" for r in ran) / len(ran) if ran else None


def parse_plant(spec: str | None, world_size: int) -> str:
    """Validate ``RANK:COLLECTIVE`` for the self-test; return it normalised ('' when unset)."""
    if not spec:
        return ""
    rank, sep, coll = spec.partition(":")
    hint = f"e.g. --plant-deadlock 1:all_reduce (ranks 0..{world_size - 1}; {', '.join(COLLECTIVES)})"
    if not sep or not rank.strip().isdigit() or coll.strip() not in COLLECTIVES:
        raise InputError(None, "--plant-deadlock", f"{spec!r} is not RANK:COLLECTIVE", hint)
    if int(rank) >= world_size:
        raise InputError(None, "--plant-deadlock", f"rank {rank} is outside world size {world_size}", hint)
    return f"{int(rank)}:{coll.strip()}"


def free_port() -> int:
    # Bind to port 0 and let the kernel pick; the rank-0 store binds it a moment later.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # so `-m stages.compat.rank` imports this checkout
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH", "")]))
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # single host: never pick a routable interface
    # DETAIL wraps the process group so a mismatched collective fails within milliseconds (docs/measured.md).
    env.setdefault("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    return env


def run_collectives(
    *,
    world_size: int,
    backend: str,
    max_mb: float,
    timeout: float,
    workdir: Path,
    plant: str = "",
    bandwidth_mb: tuple[int, ...] = (),
    bandwidth_iters: int = 5,
) -> CollectivesRun:
    """Run every collective on ``world_size`` ranks, then time the bandwidth collectives at
    ``bandwidth_mb`` (MiB); never returns with a rank process alive."""
    workdir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    for attempt in range(2):
        events, exits = _launch(
            world_size=world_size,
            backend=backend,
            max_mb=max_mb,
            timeout=timeout,
            workdir=workdir,
            plant=plant,
            bandwidth=(bandwidth_mb, bandwidth_iters),
        )
        # The free port can be taken between our probe and rank 0's bind: that alone earns one retry.
        if attempt == 0 and any("address already in use" in e.get("message", "").lower() for ev in events for e in ev):
            continue
        break
    elapsed = time.monotonic() - start
    left = _kill_leftovers(events)
    described = tuple(_describe_exit(r, e) for r, e in enumerate(exits))
    logs = tuple(_stderr_tail(e) for e in exits)
    results = _interpret(events, exits, timeout)
    points, problem = interpret(events, world_size) if bandwidth_mb else ([], "")
    return CollectivesRun(backend, world_size, tuple(results), elapsed, left, described, logs, tuple(points), problem)


def _launch(
    *,
    world_size: int,
    backend: str,
    max_mb: float,
    timeout: float,
    workdir: Path,
    plant: str,
    bandwidth: tuple[tuple[int, ...], int],
) -> tuple[list[list[dict[str, Any]]], list[proc.ProcResult | None]]:
    port = free_port()
    grace = max(2.0, min(10.0, timeout / 2))
    sizes, iters = bandwidth
    steps = len(COLLECTIVES) + 3 + len(BANDWIDTH_OPS) * len(sizes)  # each bounded by the rank's watchdog
    backstop = _STARTUP_ALLOWANCE_S + steps * (timeout + grace)
    env = _rank_env()
    paths = [workdir / f"rank{r}.events.jsonl" for r in range(world_size)]
    for p in paths:
        p.unlink(missing_ok=True)
    exits: list[proc.ProcResult | None] = [None] * world_size

    def launch(rank: int) -> None:
        argv = [sys.executable, "-m", "stages.compat.rank", "--rank", str(rank), "--world-size", str(world_size)]
        argv += ["--port", str(port), "--backend", backend, "--timeout", str(timeout), "--max-mb", str(max_mb)]
        argv += ["--events", str(paths[rank]), "--plant", plant]
        argv += ["--bandwidth-mb", ",".join(map(str, sizes)), "--bandwidth-iters", str(iters)]
        exits[rank] = proc.run(argv, timeout=backstop, env=env)

    # One thread per rank only to wait on proc.run side by side; each rank is its own process group.
    threads = [threading.Thread(target=launch, args=(r,), daemon=True) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [_read_events(p) for p in paths], exits


def _stderr_tail(res: proc.ProcResult | None, lines: int = 15) -> str:
    if res is None:
        return ""
    return "\n".join(res.stderr.strip().splitlines()[-lines:])


def _read_events(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        with contextlib.suppress(ValueError):  # a line cut short by a kill
            out.append(json.loads(line))
    return out


def _kill_leftovers(events: list[list[dict[str, Any]]]) -> int:
    """Rank processes still alive after proc.run returned (none expected): kill and count them."""
    import psutil

    left = 0
    for evs in events:
        pid = next((e.get("pid") for e in evs if e["event"] == "start"), None)
        if not pid:
            continue
        try:
            p = psutil.Process(pid)
            if p.status() == psutil.STATUS_ZOMBIE or sys.executable not in " ".join(p.cmdline()):
                continue
            left += 1
            p.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return left


def _describe_exit(rank: int, res: proc.ProcResult | None) -> str:
    if res is None:
        return f"rank {rank}: not started"
    if res.returncode == WATCHDOG_EXIT:
        return f"rank {rank}: ended by its watchdog"
    if res.timed_out:
        return f"rank {rank}: killed by the backstop ({res.describe()})"
    return f"rank {rank}: {res.describe()}"


def _first(evs: list[dict[str, Any]], event: str, coll: str) -> dict[str, Any] | None:
    return next((e for e in evs if e["event"] == event and e["collective"] == coll), None)


def _interpret(
    events: list[list[dict[str, Any]]], exits: list[proc.ProcResult | None], timeout: float
) -> list[CollectiveResult]:
    world = len(events)
    ranks = range(world)
    results: list[CollectiveResult] = []
    not_ready = [r for r in ranks if not any(e["event"] == "init_ok" for e in events[r])]
    if not_ready:
        why = _errors(events, "init_process_group") or _tail(exits, not_ready)
        timed = any(_first(events[r], "watchdog", "init_process_group") for r in ranks) or "timed out" in why.lower()
        msg = f"init_process_group: {_ranks(not_ready)} did not join the process group within {timeout:g} s"
        return [
            CollectiveResult(
                c,
                "failed" if i == 0 else "skipped",
                f"{msg}: {why}" if i == 0 else f"not run: {msg}",
                deadlock=i == 0 and timed,
            )
            for i, c in enumerate(COLLECTIVES)
        ]
    broken = ""
    for coll in COLLECTIVES:
        if broken:
            results.append(CollectiveResult(coll, "skipped", f"not run: the process group broke at {broken}"))
            continue
        done = {
            r: next((e for e in events[r] if e["collective"] == coll and e["event"] in ("pass", "fail", "skip")), None)
            for r in ranks
        }
        if all(done.values()):
            kinds = {d["event"] for d in done.values() if d}
            secs = max(d.get("seconds", 0.0) for d in done.values() if d)
            timings = [d.get("timings", []) for d in done.values() if d]
            if "fail" in kinds:
                msg = "; ".join(d["message"] for d in done.values() if d and d["event"] == "fail")
                results.append(CollectiveResult(coll, "failed", msg, secs, details={"timings": timings}))
            elif kinds == {"skip"}:
                results.append(CollectiveResult(coll, "skipped", next(d for d in done.values() if d)["message"]))
            else:
                sizes = sorted({t["bytes"] for per in timings for t in per})
                msg = f"{world} ranks, {len(sizes)} sizes up to {sizes[-1] / (1 << 20):.3g} MiB, results exact"
                if coll == "barrier":
                    msg = f"{world} ranks passed the barrier"
                results.append(CollectiveResult(coll, "passed", msg, secs, details={"timings": timings}))
            continue
        broken = coll
        results.append(_deadlock_or_failure(coll, events, exits, timeout))
    return results


def _deadlock_or_failure(
    coll: str, events: list[list[dict[str, Any]]], exits: list[proc.ProcResult | None], timeout: float
) -> CollectiveResult:
    ranks = range(len(events))
    # arrived = reached the barrier in front of the collective; a rank that did not never joined it
    missing = [r for r in ranks if not _first(events[r], "arrive", coll)]
    stuck = [r for r in ranks if _first(events[r], "watchdog", coll)]
    errors = {r: e for r in ranks if (e := _first(events[r], "error", coll))}
    planted = [r for r in ranks if _first(events[r], "planted", coll)]
    timed = bool(stuck) or any(e.get("timeout") for e in errors.values())
    detect = [
        e["t"] - enter["t"]
        for r, e in errors.items()
        if e.get("timeout") and (enter := _first(events[r], "enter", coll))
    ]
    details: dict[str, Any] = {"missing_ranks": missing, "stuck_ranks": stuck, "planted_ranks": planted}
    if detect:
        details["detected_after_s"] = round(min(detect), 3)
    evidence = "; ".join(f"rank {r}: {e['message'].splitlines()[0]}" for r, e in errors.items())
    if missing and timed:
        msg = f"{coll}: deadlock: {_ranks(missing)} never joined {coll} within {timeout:g} s"
    elif timed:
        msg = (
            f"{coll}: deadlock: the collective did not complete on {_ranks(stuck or list(errors))} within {timeout:g} s"
        )
    else:
        msg = f"{coll}: failed on {_ranks(list(errors) or missing)}"
    if "detected_after_s" in details:
        msg += f" (detected after {details['detected_after_s']:.1f} s)"
    if planted:
        msg += f" [planted self-test: rank {_join(planted)} skips {coll}]"
    if evidence:
        msg += f"; {evidence}"
    crashed = _tail(exits, [r for r in ranks if r not in stuck and r not in errors])
    if crashed:
        msg += f"; {crashed}"
    return CollectiveResult(coll, "failed", msg, deadlock=timed, details=details)


def _errors(events: list[list[dict[str, Any]]], coll: str) -> str:
    return "; ".join(
        f"rank {r}: {e['message'].splitlines()[0]}" for r, evs in enumerate(events) if (e := _first(evs, "error", coll))
    )


def _tail(exits: list[proc.ProcResult | None], ranks: list[int]) -> str:
    parts = []
    for r in ranks:
        res = exits[r]
        if res is None or res.returncode in (0, WATCHDOG_EXIT, 1):
            continue
        last = (res.stderr.strip().splitlines() or [""])[-1][:300]
        parts.append(f"rank {r} {res.describe()}" + (f": {last}" if last else ""))
    return "; ".join(parts)


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + _join(ranks)


def _join(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks) or "?"
