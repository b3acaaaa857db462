"""Serving under load (``performance_baseline --load qps=50,100,200``): an open-loop load generator
in front of the model, one fresh process per rate.

Requests arrive as a Poisson process at the target rate, whatever the server does: the generator
thread schedules every request's *intended* send time in advance and latency is measured from that
time, not from when the request was actually handed over. A server that stalls for 50 ms therefore
shows the requests that queued behind the stall (coordinated omission corrected, as wrk2 and
HdrHistogram do); a closed-loop client, which sends the next request only after the previous answer,
would have waited politely and timed one slow request in hundreds (``closed_loop`` exists to show it).

Requests wait in a FIFO queue; the server takes the oldest and, with ``--max-batch N``, up to N-1 more
that arrive within ``--max-wait-ms`` (dynamic batching), then runs the model once on the batch. A
request still queued ``--load-timeout`` seconds after its intended time is dropped and counted as a
timeout, with its waiting time in the latency samples (dropping can never make P99 look better); one
answered later than that counts as a timeout too. An exception in the model fails every request of
its batch (errors).

Metrics per rate ``r`` (the point ``[qps=r]``): ``load_latency_ms[qps=r]`` (median; samples: every
request), ``.p50``/``.p99``/``.p999`` (Harrell-Davis), ``load_achieved_qps[qps=r]``,
``load_timeouts[qps=r]``, ``load_errors[qps=r]``, ``load_error_rate[qps=r]`` ((timeouts + errors) /
requests sent).
"""

from __future__ import annotations

import os
import queue
import random
import re
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gatekeeper.contract.metric_points import SKIPPED, point_name
from gatekeeper.core.errors import InputError
from gatekeeper.stats.compare import harrell_davis
from stages._stage import StageContext
from stages.isolate import run_isolated

__all__ = ["LoadResult", "closed_loop", "open_loop", "parse_rates", "record_rate", "run", "serve_rate"]

MAX_QPS = 100_000.0
_RATES = re.compile(r"^\s*qps\s*=\s*(.+)$")


def parse_rates(text: str) -> tuple[float, ...]:
    """``qps=50,100,200`` -> (50.0, 100.0, 200.0)."""
    hint = "e.g. --load qps=50,100,200"
    m = _RATES.match(text or "")
    if not m:
        raise InputError(None, "--load", f"{text!r} is not qps=R1,R2,...", hint)
    rates = []
    for raw in m.group(1).split(","):
        try:
            rate = float(raw.strip())
        except ValueError:
            raise InputError(None, "--load", f"{raw.strip()!r} is not a rate in requests per second", hint) from None
        if not 0 < rate <= MAX_QPS:
            raise InputError(None, "--load", f"rate {raw.strip()} is outside 0 < qps <= {MAX_QPS:g}", hint)
        rates.append(rate)
    if len(set(rates)) != len(rates):
        raise InputError(None, "--load", f"{text!r} repeats a rate", "list each rate once")
    return tuple(rates)


def rate_label(rate: float) -> str:
    return f"{rate:g}"


@dataclass
class LoadResult:
    rate: float
    duration_s: float
    sent: int = 0
    completed: int = 0  # answered (in time or late)
    timeouts: int = 0  # dropped at their deadline, or answered after it
    errors: int = 0
    latencies_s: list[float] = field(default_factory=list)  # answered and dropped requests, from intended send
    batch_sizes: list[int] = field(default_factory=list)
    span_s: float = 0.0  # first intended send to last answer

    @property
    def achieved_qps(self) -> float:
        return self.completed / self.span_s if self.span_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "duration_s": self.duration_s,
            "sent": self.sent,
            "completed": self.completed,
            "timeouts": self.timeouts,
            "errors": self.errors,
            "latencies_s": self.latencies_s,
            "batch_sizes": self.batch_sizes,
            "span_s": self.span_s,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoadResult:
        return cls(**d)


def arrivals(rate: float, duration_s: float, seed: int) -> list[float]:
    """Poisson arrival offsets (seconds from the start) at ``rate`` per second within ``duration_s``."""
    rng = random.Random(seed)  # a reproducible schedule, not cryptography  # nosec B311
    out: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= duration_s:
            return out
        out.append(t)


def open_loop(
    serve: Callable[[int], Any],
    *,
    rate: float,
    duration_s: float,
    max_batch: int = 1,
    max_wait_s: float = 0.0,
    timeout_s: float = 1.0,
    seed: int = 0,
) -> LoadResult:
    """Drive ``serve(batch_size)`` with Poisson arrivals at ``rate``; latency from each intended send time."""
    schedule = arrivals(rate, duration_s, seed)
    result = LoadResult(rate, duration_s, sent=len(schedule))
    inbox: queue.Queue[float | None] = queue.Queue()
    start = time.perf_counter() + 0.01

    def generate() -> None:
        for offset in schedule:
            intended = start + offset
            delay = intended - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            inbox.put(intended)  # late or not, the request carries the time it should have been sent
        inbox.put(None)

    generator = threading.Thread(target=generate, name="load-generator", daemon=True)
    generator.start()
    last_answer = start
    finished = False
    while not finished:
        first = inbox.get()
        if first is None:
            break
        batch = [first]
        until = time.perf_counter() + max_wait_s
        while len(batch) < max_batch:
            left = until - time.perf_counter()
            try:
                nxt = inbox.get(timeout=left) if left > 0 else inbox.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                finished = True
                break
            batch.append(nxt)
        now = time.perf_counter()
        live = []
        for intended in batch:
            if now - intended > timeout_s:  # waited past its deadline: dropped, never served
                result.timeouts += 1
                result.latencies_s.append(now - intended)
            else:
                live.append(intended)
        if not live:
            continue
        try:
            serve(len(live))
            failed = False
        except Exception:
            failed = True
        done = time.perf_counter()
        last_answer = done
        result.batch_sizes.append(len(live))
        if failed:
            result.errors += len(live)
            continue
        for intended in live:
            latency = done - intended
            result.completed += 1
            result.latencies_s.append(latency)
            if latency > timeout_s:
                result.timeouts += 1
    generator.join(timeout=5)
    result.span_s = max(last_answer - start, 1e-9)
    return result


def closed_loop(serve: Callable[[int], Any], *, duration_s: float) -> list[float]:
    """One client that sends the next request when the previous one is answered (latency from the actual
    send). Kept to show what it misses: a stall delays one request, and the client simply waits."""
    latencies = []
    end = time.perf_counter() + duration_s
    while time.perf_counter() < end:
        sent = time.perf_counter()
        serve(1)
        latencies.append(time.perf_counter() - sent)
    return latencies


def serve_rate(cfg: dict[str, Any]) -> dict[str, Any]:
    """In a fresh worker process: load the model, warm up every batch size, drive it at ``cfg['rate']``."""
    import torch

    from stages.models import load_model, parse_shape

    device = torch.device(cfg["device"])
    if device.type == "cpu":
        # the generator thread needs a core of its own to keep time: the model gets the others
        torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))
    loaded = load_model(cfg.get("model"), seed=cfg.get("seed", 0))
    module = loaded.module.to(device).eval()
    shape = parse_shape(cfg.get("input_shape"))
    max_batch = int(cfg["max_batch"])
    inputs = {b: loaded.example_input(b, shape, cfg.get("seed", 0)).to(device) for b in range(1, max_batch + 1)}
    gpu = device.type == "cuda"

    def serve(batch: int) -> None:
        with torch.inference_mode():
            module(inputs[batch])
        if gpu:
            torch.cuda.synchronize()

    for b in inputs:
        for _ in range(int(cfg.get("warmup", 3))):
            serve(b)
    result = open_loop(
        serve,
        rate=float(cfg["rate"]),
        duration_s=float(cfg["duration_s"]),
        max_batch=max_batch,
        max_wait_s=float(cfg["max_wait_ms"]) / 1000.0,
        timeout_s=float(cfg["timeout_s"]),
        seed=int(cfg.get("seed", 0)),
    )
    return result.to_dict()


def record_rate(rec: Any, result: LoadResult) -> dict[str, Any]:
    """The metrics of one rate on a stage ``Recorder``; returns its summary row."""
    point = {"qps": rate_label(result.rate)}
    ms = [x * 1000.0 for x in result.latencies_s]

    def name(base: str, suffix: str = "") -> str:
        return point_name(base, point, suffix)

    rate_errors = (result.timeouts + result.errors) / result.sent if result.sent else None
    if ms:
        rec.metric(
            name("load_latency_ms"), statistics.median(ms), "ms", "lower", samples=ms,
            description=f"from the intended send time (open loop, Poisson at {result.rate:g}/s); a sample per request",
        )  # fmt: skip
        for stat, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999)):
            rec.metric(
                name("load_latency_ms", f".{stat}"), harrell_davis(ms, q), "ms", "lower", description="Harrell-Davis"
            )
    else:
        why = f"{SKIPPED}no request was answered or dropped at {result.rate:g}/s"
        rec.metric(name("load_latency_ms"), None, "ms", "lower", description=why)
    rec.metric(name("load_achieved_qps"), result.achieved_qps, "req/s", "higher", description="answered / span")
    rec.metric(name("load_timeouts"), float(result.timeouts), "count", "lower")
    rec.metric(name("load_errors"), float(result.errors), "count", "lower")
    rec.metric(name("load_error_rate"), rate_errors, "ratio", "lower", description="(timeouts + errors) / sent")
    row = {
        "qps": result.rate,
        "sent": result.sent,
        "achieved_qps": round(result.achieved_qps, 3),
        "timeouts": result.timeouts,
        "errors": result.errors,
        "mean_batch": round(statistics.fmean(result.batch_sizes), 3) if result.batch_sizes else None,
    }
    if ms:
        row |= {
            "p50_ms": round(harrell_davis(ms, 0.5), 4),
            "p99_ms": round(harrell_davis(ms, 0.99), 4),
            "p999_ms": round(harrell_davis(ms, 0.999), 4),
        }
    return row


def run(
    ctx: StageContext,
    rates_spec: str,
    duration_s: float,
    *,
    max_batch: int,
    max_wait_ms: float,
    timeout_s: float,
) -> dict[str, Any]:
    """Each rate in a fresh process; a crash or hang is a failed check ``load[qps=r]`` and the next rate runs."""
    rec, common = ctx.rec, ctx.common
    rates = parse_rates(rates_spec)
    if max_batch < 1:
        raise InputError(None, "--max-batch", f"must be at least 1 (got {max_batch})", "pass --max-batch 1 or more")
    if max_wait_ms < 0 or timeout_s <= 0:
        raise InputError(
            None,
            "--max-wait-ms/--load-timeout",
            "must be >= 0 and > 0 seconds respectively",
            "pass --max-wait-ms 0 or more and a positive --load-timeout",
        )
    rows = []
    for i, rate in enumerate(rates):
        point = {"qps": rate_label(rate)}
        cfg = {
            "model": common.model,
            "input_shape": common.input_shape,
            "seed": common.seed + i,
            "device": ctx.device.torch_device,
            "rate": rate,
            "duration_s": duration_s,
            "max_batch": max_batch,
            "max_wait_ms": max_wait_ms,
            "timeout_s": timeout_s,
        }
        limit = duration_s + timeout_s + common.check_timeout
        outcome = run_isolated("stages.perf.load:serve_rate", cfg, timeout=limit)
        check_name = point_name("load", point)
        if not outcome.ok:
            check = rec.outcome(check_name, outcome)
            first = check.message.strip().splitlines()[0] if check.message.strip() else check.status
            for base, unit in (("load_latency_ms", "ms"), ("load_error_rate", "ratio")):
                rec.metric(point_name(base, point), None, unit, "lower", description=f"{SKIPPED}{first}")
            rows.append({"qps": rate, "status": check.status, "reason": first})
            continue
        result = LoadResult.from_dict(outcome.value)
        row = record_rate(rec, result)
        p99 = row.get("p99_ms")
        said = (
            f"{result.sent} requests in {duration_s:g} s: P99 {p99:.2f} ms, {row['achieved_qps']:.1f} answered/s, "
            f"{result.timeouts} timeouts, {result.errors} errors"
            if p99 is not None
            else f"{result.sent} requests: none answered"
        )
        rec.record(check_name, "passed", said, duration_s=outcome.duration_s)
        rows.append({**row, "status": "measured"})
    return {
        "duration_s": duration_s,
        "max_batch": max_batch,
        "max_wait_ms": max_wait_ms,
        "timeout_s": timeout_s,
        "rates": rows,
    }
