"""One rank of the distributed cases: ``python -m stages.functional.dist_rank``.

Runs the named collective cases in order in one process group and appends one
JSON line per case to ``<out>/rank<R>.jsonl`` as soon as it finishes, so the
parent knows exactly which case was in flight when a rank hung or died.
Every rank computes the expected result itself, in float64, from the seeds of
all ranks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["CASES", "main"]

N = 1031  # odd: no collective gets a power-of-two-aligned buffer for free


def _data(rank: int, seed: int, dtype: Any, n: int = N) -> Any:
    import torch

    g = torch.Generator().manual_seed(1000 * seed + rank)
    return torch.randn(n, generator=g, dtype=torch.float64).to(dtype)


def _close(got: Any, want: Any, tol: float) -> None:
    got, want = got.double().cpu(), want.double()
    err = float((got - want).abs().max() / want.abs().max().clamp_min(1e-30)) if want.numel() else 0.0
    assert err <= tol, f"relative error {err:.3g} > {tol:g}"


def _all_reduce(op: str, dtype_name: str, tol: float) -> Callable[..., None]:
    def case(dist: Any, rank: int, world: int, dev: Any, seed: int) -> None:
        import torch

        dtype = getattr(torch, dtype_name)
        everyone = [_data(r, seed, dtype).double() for r in range(world)]
        if dtype_name == "int64":
            everyone = [(x * 1000).round() for x in everyone]
        t = everyone[rank].to(dtype).to(dev)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op.upper()))
        stacked = torch.stack([x.to(dtype).double() for x in everyone])
        want = stacked.sum(0) if op == "sum" else stacked.amax(0)
        _close(t, want, tol)

    return case


def _broadcast(dist: Any, rank: int, world: int, dev: Any, seed: int) -> None:
    import torch

    t = _data(rank, seed, torch.float32).to(dev)
    dist.broadcast(t, src=world - 1)
    _close(t, _data(world - 1, seed, torch.float32), 0.0)


def _all_gather(dist: Any, rank: int, world: int, dev: Any, seed: int) -> None:
    import torch

    out = [torch.empty(N, device=dev) for _ in range(world)]
    dist.all_gather(out, _data(rank, seed, torch.float32).to(dev))
    for r in range(world):
        _close(out[r], _data(r, seed, torch.float32), 0.0)


def _reduce_scatter(dist: Any, rank: int, world: int, dev: Any, seed: int) -> None:
    import torch

    chunks = [_data(rank, seed + 17 * r, torch.float32).to(dev) for r in range(world)]
    out = torch.empty(N, device=dev)
    dist.reduce_scatter(out, chunks)
    want = sum(_data(r, seed + 17 * rank, torch.float32).double() for r in range(world))
    _close(out, want, 1e-6)


def _all_to_all(dist: Any, rank: int, world: int, dev: Any, seed: int) -> None:
    import torch

    send = _data(rank, seed, torch.float32, N * world).to(dev)
    recv = torch.empty(N * world, device=dev)
    dist.all_to_all_single(recv, send)
    want = torch.cat([_data(r, seed, torch.float32, N * world)[rank * N : (rank + 1) * N] for r in range(world)])
    _close(recv, want, 0.0)


def _send_recv(dist: Any, rank: int, world: int, dev: Any, seed: int) -> None:
    import torch

    # a ring: each rank sends to the next and receives from the previous (isend avoids a deadlock)
    req = dist.isend(_data(rank, seed, torch.float32).to(dev), dst=(rank + 1) % world)
    got = torch.empty(N, device=dev)
    dist.recv(got, src=(rank - 1) % world)
    req.wait()
    _close(got, _data((rank - 1) % world, seed, torch.float32), 0.0)


def _reduce(dist: Any, rank: int, world: int, dev: Any, seed: int) -> None:
    import torch

    t = _data(rank, seed, torch.float32).to(dev)
    dist.reduce(t, dst=0)
    if rank == 0:
        _close(t, sum(_data(r, seed, torch.float32).double() for r in range(world)), 1e-6)


def _barrier(dist: Any, rank: int, world: int, dev: Any, seed: int) -> None:
    if dist.get_backend() == "gloo":
        # names the missing rank instead of waiting silently (docs/measured.md, gloo traps)
        dist.monitored_barrier(timeout=dt.timedelta(seconds=30))
    else:
        dist.barrier()


CASES: dict[str, Callable[..., None]] = {
    "all_reduce.sum.float32": _all_reduce("sum", "float32", 1e-6),
    "all_reduce.max.float32": _all_reduce("max", "float32", 0.0),
    "all_reduce.sum.int64": _all_reduce("sum", "int64", 0.0),
    "all_reduce.sum.bfloat16": _all_reduce("sum", "bfloat16", 8e-3),
    "broadcast": _broadcast,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
    "send_recv.ring": _send_recv,
    "reduce": _reduce,
    "monitored_barrier": _barrier,
}


def _expire(write: Callable[[dict[str, Any]], None], name: str, rank: int, timeout: float) -> None:
    write(
        {
            "case": name,
            "status": "failed",
            "message": f"timed out after {timeout:g} s",
            "broken": True,
            "duration_s": timeout,
        }
    )
    os._exit(4)  # the main thread is stuck in C++: nothing else would end it


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--backend", default="gloo")
    p.add_argument("--device", default="cpu")
    p.add_argument("--cases", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per case (a watchdog) and per collective")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)

    import torch
    import torch.distributed as dist

    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(
        args.backend,
        init_method=f"tcp://127.0.0.1:{args.port}",
        rank=args.rank,
        world_size=args.world,
        timeout=dt.timedelta(seconds=args.timeout),
    )
    path = args.out / f"rank{args.rank}.jsonl"
    lock = threading.Lock()
    with open(path, "a", encoding="utf-8") as log:

        def write(row: dict[str, Any]) -> None:
            with lock:
                log.write(json.dumps(row) + "\n")
                log.flush()
                os.fsync(log.fileno())

        for name in args.cases.split(","):
            # gloo gives a rank whose peer skipped a collective no error until the process-group
            # timeout, and a case may hang outside any collective: a watchdog ends either
            watchdog = threading.Timer(args.timeout, _expire, (write, name, args.rank, args.timeout))
            watchdog.daemon = True
            start = time.monotonic()
            watchdog.start()
            try:
                CASES[name](dist, args.rank, args.world, dev, args.seed)
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                row = {"case": name, "status": "passed", "message": "", "broken": False}
            except AssertionError as err:
                row = {"case": name, "status": "failed", "message": str(err), "broken": False}
            except Exception as err:
                # a collective that raised (a timeout, a lost peer) leaves the process group unusable
                row = {
                    "case": name,
                    "status": "failed",
                    "message": f"{type(err).__name__}: {err}"[:500],
                    "broken": True,
                }
            watchdog.cancel()
            row["duration_s"] = time.monotonic() - start
            write(row)
            if row["broken"]:
                return 3  # the parent reruns the remaining cases in a fresh pair
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
