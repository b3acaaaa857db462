"""What an open-loop load test sees of a server stall, and what a closed-loop client sees of the same stall.

The server (``stages.perf.load``'s fake-able ``serve``) answers in ``--service-ms`` and, once per
``--stall-every-s`` seconds, stalls ``--stall-ms`` more. Each trial drives it for ``--seconds``: open loop at
``--qps`` (Poisson arrivals, latency from the intended send time, as performance_baseline --load does) and
closed loop (one client, next request after the answer). Prints the P50/P99/P99.9 of both, the median
over ``--trials`` trials, as a markdown table for benchmarks/README.md.

    python benchmarks/load_coordinated_omission.py
    python benchmarks/load_coordinated_omission.py --qps 100,400 --stall-ms 50 --trials 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gatekeeper.stats.compare import harrell_davis
from stages.perf import load


class StallingServer:
    def __init__(self, service_s: float, stall_s: float, every_s: float) -> None:
        self.service_s, self.stall_s, self.every_s = service_s, stall_s, every_s
        self.next_stall = time.perf_counter() + every_s / 2

    def __call__(self, batch: int) -> None:
        time.sleep(self.service_s)
        if self.stall_s and time.perf_counter() >= self.next_stall:
            time.sleep(self.stall_s)
            self.next_stall = time.perf_counter() + self.every_s


def quantiles(latencies_s: list[float]) -> tuple[float, float, float]:
    ms = [x * 1000 for x in latencies_s]
    return harrell_davis(ms, 0.5), harrell_davis(ms, 0.99), harrell_davis(ms, 0.999)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qps", default="50,200")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--service-ms", type=float, default=0.5)
    ap.add_argument("--stall-ms", type=float, default=50.0)
    ap.add_argument("--stall-every-s", type=float, default=1.0)
    ap.add_argument("--trials", type=int, default=3)
    a = ap.parse_args()
    print("| client | qps | stall | requests | P50 ms | P99 ms | P99.9 ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for qps in load.parse_rates(f"qps={a.qps}"):
        for stall in (0.0, a.stall_ms):
            rows = {"open loop": [], "closed loop": []}
            counts = {"open loop": [], "closed loop": []}
            for trial in range(a.trials):
                server = StallingServer(a.service_ms / 1000, stall / 1000, a.stall_every_s)
                r = load.open_loop(server, rate=qps, duration_s=a.seconds, seed=trial)
                rows["open loop"].append(quantiles(r.latencies_s))
                counts["open loop"].append(len(r.latencies_s))
                server = StallingServer(a.service_ms / 1000, stall / 1000, a.stall_every_s)
                closed = load.closed_loop(server, duration_s=a.seconds)
                rows["closed loop"].append(quantiles(closed))
                counts["closed loop"].append(len(closed))
            for client, qs in rows.items():
                med = [statistics.median(q[i] for q in qs) for i in range(3)]
                rate = f"{qps:g}" if client == "open loop" else "as fast as answered"
                n = int(statistics.median(counts[client]))
                print(
                    f"| {client} | {rate} | {stall:g} ms every {a.stall_every_s:g} s | {n} | "
                    f"{med[0]:.2f} | {med[1]:.2f} | {med[2]:.2f} |"
                )


if __name__ == "__main__":
    main()
