"""One rank of the collectives check, started by ``stages.compat.collectives``.

It runs each collective in turn (then, when asked, times the bandwidth collectives)
and appends what happens to an events file (JSON lines, flushed per line), so the
coordinator can say which collective hung and which rank never joined even when
this process has to be killed. Before each collective a gloo ``monitored_barrier`` (which names the ranks that failed to
arrive) checks that every rank joined; a watchdog thread ends the process when a
step outlives the timeout, because a rank stuck in NCCL/RCCL (or one that never
joins, like the planted self-test rank) would otherwise wait forever.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["BANDWIDTH_OPS", "COLLECTIVES", "WATCHDOG_EXIT", "main"]

# Run in this order; the stage records one check per name.
COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "barrier")
# Timed after the checks when --bandwidth-mb names sizes (stages.compat.bandwidth reads the events).
BANDWIDTH_OPS = ("all_reduce", "all_gather", "reduce_scatter")
WATCHDOG_EXIT = 86
# Values stay below 2**24 so float32 sums over ranks are exact and results can be compared bitwise.
_RANK_STRIDE = 1024.0


class _Events:
    def __init__(self, path: Path, rank: int) -> None:
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
        self._rank = rank
        self._lock = threading.Lock()

    def emit(self, event: str, collective: str = "", **fields: Any) -> None:
        line = json.dumps({"t": time.time(), "rank": self._rank, "event": event, "collective": collective, **fields})
        with self._lock:
            self._f.write(line + "\n")
            self._f.flush()
            os.fsync(self._f.fileno())


class _Watchdog:
    """Ends the process when the current step runs past its deadline."""

    def __init__(self, events: _Events) -> None:
        self._events = events
        self._deadline = float("inf")
        self._step = ""
        self._lock = threading.Lock()
        threading.Thread(target=self._watch, daemon=True).start()

    def arm(self, step: str, seconds: float) -> None:
        with self._lock:
            self._step, self._deadline = step, time.monotonic() + seconds

    def disarm(self) -> None:
        with self._lock:
            self._deadline = float("inf")

    def _watch(self) -> None:
        while True:
            time.sleep(0.2)
            with self._lock:
                late = time.monotonic() > self._deadline
                step = self._step
            if late:
                self._events.emit("watchdog", step, message=f"still inside {step} at the deadline")
                os._exit(WATCHDOG_EXIT)


def _sizes(max_mb: float) -> list[int]:
    """Element counts (float32): a small message, 1 MiB, and the largest size."""
    mbs = sorted({min(m, max_mb) for m in (1 / 256, 1.0, max_mb)})
    return [max(1, int(mb * (1 << 20) / 4)) for mb in mbs]


def _base(n: int) -> Any:
    import torch

    return (torch.arange(n, dtype=torch.float32) % 4099).contiguous()


def _run_collective(name: str, n: int, rank: int, world: int, device: str) -> str:
    """Run one collective on ``n`` float32 elements and check the result exactly; return a problem or ''."""
    import torch
    import torch.distributed as dist

    base = _base(n)
    mine = (base + rank * _RANK_STRIDE).to(device)
    offset = _RANK_STRIDE * world * (world - 1) / 2
    if name == "all_reduce":
        dist.all_reduce(mine)
        got, want = mine, base * world + offset
    elif name == "all_gather":
        outs = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(outs, mine)
        got, want = torch.cat(outs), torch.cat([base + q * _RANK_STRIDE for q in range(world)])
    elif name == "broadcast":
        dist.broadcast(mine, src=0)
        got, want = mine, base
    elif name == "reduce_scatter":
        full = _base(n * world)
        chunks = [(c + rank * _RANK_STRIDE).to(device) for c in full.chunk(world)]
        got = torch.empty(n, dtype=torch.float32, device=device)
        dist.reduce_scatter(got, chunks)
        want = full.chunk(world)[rank] * world + offset
    elif name == "barrier":
        dist.barrier()
        return ""
    else:
        raise ValueError(f"unknown collective {name}")
    if device != "cpu":
        torch.cuda.synchronize()
    got = got.cpu()
    if not torch.equal(got, want):
        bad = int((got != want).sum())
        return f"{bad} of {want.numel()} elements wrong on rank {rank} ({n * 4} bytes per rank)"
    return ""


def _time_collective(op: str, size: int, world: int, device: str, *, iters: int, group: Any) -> list[float]:
    """Seconds per iteration of ``op`` on ``size`` bytes as nccl-tests counts them (all_reduce: the
    buffer; all_gather and reduce_scatter: the whole array, ``world`` parts), after one warm-up call."""
    import torch
    import torch.distributed as dist

    n = size // 4
    part = max(1, n // world)
    if op == "all_reduce":
        buf = torch.ones(n, device=device)

        def call() -> None:
            dist.all_reduce(buf, group=group)
    elif op == "all_gather":
        mine, outs = torch.ones(part, device=device), [torch.empty(part, device=device) for _ in range(world)]

        def call() -> None:
            dist.all_gather(outs, mine, group=group)
    elif op == "reduce_scatter":
        chunks, out = [torch.ones(part, device=device) for _ in range(world)], torch.empty(part, device=device)

        def call() -> None:
            dist.reduce_scatter(out, chunks, group=group)
    else:
        raise ValueError(f"no bandwidth test for {op}")

    def sync() -> None:
        if device != "cpu":
            torch.cuda.synchronize()

    call()
    sync()
    dist.barrier(group=group)  # every rank starts the timed loop together
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - t0)
    return times


def _unsupported(err: BaseException) -> bool:
    text = str(err).lower()
    return any(s in text for s in ("not supported", "does not support", "not implemented", "unsupported"))


def _timed_out(err: BaseException) -> bool:
    text = str(err).lower()
    return any(s in text for s in ("timed out", "timeout", "monitoredbarrier", "failed to pass"))


def run_rank(args: argparse.Namespace) -> int:
    events = _Events(Path(args.events), args.rank)
    events.emit("start", pid=os.getpid())
    watchdog = _Watchdog(events)
    grace = max(2.0, min(10.0, args.timeout / 2))
    plant_rank, _, plant_coll = (args.plant or "").partition(":")
    planted = plant_coll if plant_rank and int(plant_rank) == args.rank else ""

    import torch
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=args.timeout)
    device = "cpu"
    if args.backend == "nccl":
        torch.cuda.set_device(args.rank % torch.cuda.device_count())
        device = f"cuda:{torch.cuda.current_device()}"
    watchdog.arm("init_process_group", args.timeout + grace)
    try:
        dist.init_process_group(
            args.backend,
            init_method=f"tcp://127.0.0.1:{args.port}",
            rank=args.rank,
            world_size=args.world_size,
            timeout=timeout,
        )
        # monitored_barrier exists only on gloo, and its point-to-point traffic would desynchronise the
        # sequence numbers TORCH_DISTRIBUTED_DEBUG=DETAIL checks: it gets a gloo group of its own.
        monitor = dist.new_group(backend="gloo", timeout=timeout)
    except Exception as err:
        events.emit("error", "init_process_group", message=f"{type(err).__name__}: {err}", timeout=_timed_out(err))
        os._exit(1)
    events.emit("init_ok", device=device)
    sizes = _sizes(args.max_mb)
    for name in args.collectives.split(","):
        events.emit("enter", name)
        watchdog.arm(name, args.timeout + grace)
        if name == planted:
            # The self-test: this rank never joins; the others must detect it within the timeout.
            events.emit("planted", name)
            while True:
                time.sleep(3600)
        start = time.monotonic()
        events.emit("arrive", name)
        try:
            dist.monitored_barrier(group=monitor, timeout=timeout, wait_all_ranks=True)
        except Exception as err:
            events.emit("error", name, message=f"{type(err).__name__}: {err}".strip(), timeout=_timed_out(err))
            os._exit(1)
        events.emit("joined", name)
        problems, timings = [], []
        try:
            for n in sizes:
                t0 = time.monotonic()
                problem = _run_collective(name, n, args.rank, args.world_size, device)
                timings.append({"bytes": n * 4, "seconds": time.monotonic() - t0})
                if problem:
                    problems.append(problem)
        except Exception as err:
            if _unsupported(err):
                events.emit("skip", name, message=f"{args.backend}: {type(err).__name__}: {err}".strip())
                watchdog.disarm()
                continue
            tb = traceback.format_exc(limit=4)
            events.emit("error", name, message=f"{type(err).__name__}: {err}\n{tb}", timeout=_timed_out(err))
            os._exit(1)
        watchdog.disarm()
        status = "fail" if problems else "pass"
        events.emit(status, name, message="; ".join(problems), timings=timings, seconds=time.monotonic() - start)
    sizes_mb = [int(x) for x in args.bandwidth_mb.split(",") if x.strip()]
    group = None
    if sizes_mb:
        # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps the group in a fingerprint check per call (a gloo round
        # trip: 1 MiB all_reduce 10 ms instead of 3 ms here); the timings get a plain group of their own.
        watchdog.arm("bandwidth setup", args.timeout + grace)
        try:
            dist.set_debug_level(dist.DebugLevel.OFF)
            group = dist.new_group(backend=args.backend, timeout=timeout)
        except Exception as err:
            events.emit("error", "bandwidth setup", message=f"{type(err).__name__}: {err}", timeout=_timed_out(err))
            os._exit(1)
        watchdog.disarm()
    for op in BANDWIDTH_OPS if sizes_mb else ():
        for size_mb in sizes_mb:
            step = f"bandwidth {op} {size_mb} MiB"
            watchdog.arm(step, args.timeout + grace)
            try:
                seconds = _time_collective(
                    op, size_mb << 20, args.world_size, device, iters=args.bandwidth_iters, group=group
                )
            except Exception as err:
                tb = traceback.format_exc(limit=4)
                events.emit("error", step, message=f"{type(err).__name__}: {err}\n{tb}", timeout=_timed_out(err))
                os._exit(1)
            watchdog.disarm()
            events.emit("bandwidth", step, op=op, size_mb=size_mb, seconds=seconds)
    watchdog.arm("destroy_process_group", args.timeout + grace)
    dist.destroy_process_group()
    events.emit("done")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m stages.compat.rank", description="one rank of the collectives check")
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--backend", choices=["gloo", "nccl"], required=True)
    p.add_argument("--timeout", type=float, required=True)
    p.add_argument("--max-mb", type=float, required=True)
    p.add_argument("--events", required=True)
    p.add_argument("--collectives", default=",".join(COLLECTIVES))
    p.add_argument("--bandwidth-mb", default="", help="comma list of sizes (MiB) to time after the checks")
    p.add_argument("--bandwidth-iters", type=int, default=5)
    p.add_argument("--plant", default="", help="RANK:COLLECTIVE: that rank never joins that collective (self-test)")
    return p


def main(argv: list[str] | None = None) -> int:
    return run_rank(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
