"""Benchmark: `gatekeeper analyze` on a large synthetic CI log (default 500 MB).

The log is generated on the fly in a temp directory: realistic CI noise (pytest
progress, training steps, pip and compiler chatter, ANSI colours, warnings with
tracebacks) with a few real failure lines spread through it. The analysis runs
in a child process so its wall time and peak RSS are its own.

    python benchmarks/analyze_speed.py [--mb 500] [--mb 50 ...] [--gzip]
    python benchmarks/analyze_speed.py --hostile   # lines built to make the signatures' regexes backtrack
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gatekeeper.core import proc  # noqa: E402

NOISE = [
    "\x1b[32m[2024-05-01T12:00:{s:02d}.{us:06d}Z]\x1b[0m test/test_ops.py::TestCommonCUDA::"
    "test_noncontiguous_samples_{op}_cuda_float32 PASSED [ {pct}%]",
    "step {i:6d}/100000 | loss {loss:.4f} | norm {norm:.3f} | lr 3.00e-04 | {ms:.2f} ms | 15.0% bf16 MFU",
    "  Downloading https://download.pytorch.org/whl/rocm6.2/{op}-{i}.whl ({ms:.1f} MB)",
    "[{i}/{n}] /opt/rocm/llvm/bin/clang++ -O3 -fPIC --offload-arch=gfx90a -c /src/aten/{op}.hip -o {op}.o",
    "/usr/lib/python3.11/site-packages/torch/_inductor/compile_fx.py:{i}: UserWarning: "
    "TensorFloat32 tensor cores not used",
    "INFO:root:epoch {i} validation accuracy {loss:.4f} in {ms:.1f} ms, checkpoint saved to /ckpt/epoch_{i}.pt",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line {i}, in _call_impl',
    "section_start:{i}:run_tests\r\x1b[0K\x1b[36;1mRunning tests for {op}\x1b[0;m",
]
OPS = ["add", "mul", "conv2d", "matmul", "softmax", "layer_norm", "gelu", "embedding", "index_select", "cumsum"]
FAILURES = [
    "RuntimeError: HIP error: invalid device function",
    "Memory access fault by GPU node-1 (Agent handle: 0x55f8b54eec30) on address 0x7f2a53193000.",
    "Segmentation fault (core dumped) python train.py",
]


def generate(path: Path, megabytes: int, *, compress: bool) -> int:
    rng = random.Random(0)
    target = megabytes * 1_000_000
    written = 0
    opener = gzip.open if compress else open
    with opener(path, "wt", encoding="utf-8") as fh:  # type: ignore[operator]
        block_no = 0
        while written < target:
            lines = []
            for i in range(2000):
                tpl = NOISE[rng.randrange(len(NOISE))]
                lines.append(
                    tpl.format(
                        s=i % 60,
                        us=i * 7,
                        op=OPS[i % len(OPS)],
                        pct=i % 100,
                        i=i + block_no,
                        n=4000,
                        loss=rng.random(),
                        norm=rng.random() * 3,
                        ms=rng.random() * 400,
                    )
                )
            if block_no % 100 == 50:  # a failure line about every 20 MB
                lines.append(FAILURES[(block_no // 100) % len(FAILURES)])
            text = "\n".join(lines) + "\n"
            fh.write(text)
            written += len(text.encode())
            block_no += 1
    return path.stat().st_size


# Lines a test under attack could print: the start literal of "NCCL WARN.*failed"-like signatures many
# times, with the words that pass the literal pre-check but never where the regex needs them.
HOSTILE_UNIT = "NCCL WARN [c10d] TCPStore NET/IB x "


def generate_hostile(path: Path, kind: str) -> int:
    if kind == "one 1.9 MB line":
        text = "error fail " + HOSTILE_UNIT * (1_900_000 // len(HOSTILE_UNIT)) + "\n"
    else:  # "4 MB of 2,000-character lines"
        text = (("error fail " + HOSTILE_UNIT * 60)[:2000] + "\n") * 2000
    path.write_text(text, encoding="utf-8")
    return path.stat().st_size


def measure(log: Path) -> dict[str, float | str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = proc.run(
        [sys.executable, "-m", "gatekeeper", "analyze", str(log), "--format", "json"], timeout=600, cwd=ROOT
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if not result.ok:
        raise SystemExit(f"analyze failed: {result.describe()}\n{result.stderr}")
    doc = json.loads(result.stdout)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 2),
        "peak_rss_mb": round(after.ru_maxrss / 1024, 1),  # Linux reports KiB; max over children so far
        "category": doc["category"],
        "lines": doc["inputs"][0]["lines"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, action="append", help="log size in MB (repeatable; default 500)")
    parser.add_argument("--gzip", action="store_true", help="also measure the gzip-compressed log")
    parser.add_argument("--hostile", action="store_true", help="measure the hostile logs instead")
    args = parser.parse_args()
    print("| log | size on disk | lines | wall | CPU | peak RSS | category |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    if args.hostile:
        for kind in ("one 1.9 MB line", "4 MB of 2,000-character lines"):
            with tempfile.TemporaryDirectory(prefix="gk-analyze-bench-") as tmp:
                log = Path(tmp) / "job.log"
                size = generate_hostile(log, kind)
                r = measure(log)
                print(
                    f"| {kind} | {size / 1e6:.1f} MB | {r['lines']:,} | {r['wall_s']} s | {r['cpu_s']} s "
                    f"| {r['peak_rss_mb']} MB | {r['category']} |",
                    flush=True,
                )
        return
    for mb in sorted(args.mb or [500]):  # ascending, so the peak RSS column is each run's own peak
        with tempfile.TemporaryDirectory(prefix="gk-analyze-bench-") as tmp:
            variants = [("text", False)] + ([("gzip", True)] if args.gzip else [])
            for name, compress in variants:
                log = Path(tmp) / ("job.log.gz" if compress else "job.log")
                size = generate(log, mb, compress=compress)
                r = measure(log)
                print(
                    f"| {mb} MB {name} | {size / 1e6:.0f} MB | {r['lines']:,} | {r['wall_s']} s | {r['cpu_s']} s "
                    f"| {r['peak_rss_mb']} MB | {r['category']} |",
                    flush=True,
                )
                log.unlink()


if __name__ == "__main__":
    main()
