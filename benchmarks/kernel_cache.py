"""Kernel cache: cold vs warm torch.compile (inductor) of the demo model, side by side.

Each run is a fresh process whose compiler caches point into one cache root
through what ``gatekeeper cache env`` sets up (exactly what the CI jobs do: the
cache variables, and inductor's precompiled headers linked into the root). Run 1 starts
from an empty root (cold); run 2 reuses the root run 1 filled (warm), the way
GitLab's ``cache:`` restores it in the next pipeline. Each run also gets its
own empty TMPDIR: inductor writes precompiled headers under
``$TMPDIR/torchinductor_$USER`` regardless of TORCHINDUCTOR_CACHE_DIR, and a
CI job does not keep /tmp, so the warm run must not profit from it either.

    python benchmarks/kernel_cache.py [--runs-dir DIR] [--target 3] [--repeat 5]

Prints a Markdown table for benchmarks/README.md and exits 1 when the warm
compile is not at least ``--target`` times faster than the cold one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gatekeeper.core import proc  # noqa: E402 - after the path set-up for running from a checkout
from gatekeeper.kernel_cache.key import cache_env, link_inductor_headers  # noqa: E402
from gatekeeper.kernel_cache.usage import begin, collect_stats  # noqa: E402

CHILD = r"""
import json, sys, time
import torch
from stages.models import load_model
torch.manual_seed(0)
loaded = load_model(None, seed=0)
model = loaded.module.eval()
x = loaded.example_input(8)
compiled = torch.compile(model, backend="inductor")
# The fused eval-mode fast path of TransformerEncoderLayer
# (aten._transformer_encoder_layer_fwd) fails inductor's stride assertion with
# torch 2.13 (a compile bug, not a cache effect): compile the unfused layer.
torch.backends.mha.set_fastpath_enabled(False)
import resource
def _cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
c0 = _cpu()
t0 = time.perf_counter()
with torch.no_grad():
    out = compiled(x)
compile_s = time.perf_counter() - t0
compile_cpu_s = _cpu() - c0
with torch.no_grad():
    ref = model(x)
t1 = time.perf_counter()
with torch.no_grad():
    compiled(x)
step_s = time.perf_counter() - t1
from torch._dynamo.utils import counters
hits = {f"{g}.{k}": v for g in ("inductor", "aot_autograd") for k, v in counters[g].items() if "cache" in k or "hit" in k}
print(json.dumps({"compile_s": compile_s, "compile_cpu_s": compile_cpu_s, "step_s": step_s,
                  "max_abs_diff": float((out - ref).abs().max()), "counters": hits}))
"""


def run_once(cache_root: Path, label: str, link_headers: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix=f"kc-{label}-tmp-") as tmp:
        env = {**os.environ, **cache_env(cache_root, environ={}), "TMPDIR": tmp, "PYTHONPATH": str(ROOT)}
        if link_headers:
            print(f"{label}: {link_inductor_headers(cache_root, tmpdir=tmp)}", file=sys.stderr)
        begin(cache_root)
        res = proc.run([sys.executable, "-c", CHILD], timeout=900, env=env, cwd=ROOT)
        if not res.ok:
            raise SystemExit(f"{label} run failed: {res.describe()}\n{res.stderr[-2000:]}")
        result = json.loads(res.stdout.strip().splitlines()[-1])
        result["wall_s"] = res.duration_s
        print(f"{label}: {json.dumps(result)}", file=sys.stderr)
        stats = collect_stats(cache_root)
        result.update(
            cache_mb=stats.total_bytes / 2**20,
            files=stats.total_files,
            used=stats.used if stats.used is not None else -1,
            created=stats.created if stats.created is not None else -1,
        )
        return result


def once(runs_dir: Path | None) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="kc-root-") as tmp:
        root = (runs_dir or Path(tmp)) / "cache"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
        cold = run_once(root, "cold", link_headers=True)
        warm = run_once(root, "warm", link_headers=True)
        # The same warm cache through the variables alone: inductor's precompiled
        # headers are rebuilt in the fresh TMPDIR.
        bare = run_once(root, "warm-vars-only", link_headers=False)
    return cold, warm, bare


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", type=Path, help="keep the cache root here (default: a temp dir)")
    parser.add_argument("--target", type=float, default=3.0, help="required cold/warm ratio (default 3)")
    parser.add_argument("--repeat", type=int, default=1, help="cold/warm/vars-only sets, each from an empty root")
    args = parser.parse_args()
    sets = []
    for i in range(args.repeat):
        load = os.getloadavg()[0]
        cold, warm, bare = once(args.runs_dir)
        sets.append((cold, warm, bare, load, os.getloadavg()[0]))
        print(f"set {i + 1}: cold/warm {cold['compile_s'] / warm['compile_s']:.1f}x", file=sys.stderr)
    cold, warm, bare = sets[0][:3]
    ratio = cold["compile_s"] / warm["compile_s"]
    print("| run | first compiled call (s) | process wall (s) | cache after (MiB) | files | entries used | created |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    rows = (
        ("cold (empty cache)", cold),
        ("warm (`gatekeeper cache env`: variables + kept headers)", warm),
        ("warm, cache variables only (headers rebuilt)", bare),
    )
    for name, r in rows:
        print(
            f"| {name} | {r['compile_s']:.1f} | {r['wall_s']:.1f} | {r['cache_mb']:.1f} | {r['files']} "
            f"| {r['used']} | {r['created']} |"
        )
    print(f"\ncold/warm: {ratio:.1f}x (target >= {args.target:g}x): {'met' if ratio >= args.target else 'NOT met'}")
    print(f"cold/warm with the variables only: {cold['compile_s'] / bare['compile_s']:.1f}x")
    print(f"compiled vs eager max abs diff: cold {cold['max_abs_diff']:.2e}, warm {warm['max_abs_diff']:.2e}")
    if args.repeat > 1:
        print("\n| set | load avg (1 min) before, after | cold s (CPU s) | warm s (CPU s) | vars-only s (CPU s) "
              "| cold/warm wall | cold/warm CPU | cold/vars-only wall |")  # fmt: skip
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for i, (c, w, b, l0, l1) in enumerate(sets, 1):
            print(
                f"| {i} | {l0:.1f}, {l1:.1f} | {c['compile_s']:.1f} ({c['compile_cpu_s']:.1f}) "
                f"| {w['compile_s']:.1f} ({w['compile_cpu_s']:.1f}) | {b['compile_s']:.1f} ({b['compile_cpu_s']:.1f}) "
                f"| {c['compile_s'] / w['compile_s']:.1f}x | {c['compile_cpu_s'] / w['compile_cpu_s']:.1f}x "
                f"| {c['compile_s'] / b['compile_s']:.1f}x |"
            )
        walls = sorted(c["compile_s"] / w["compile_s"] for c, w, *_ in sets)
        cpus = sorted(c["compile_cpu_s"] / w["compile_cpu_s"] for c, w, *_ in sets)
        print(f"\ncold/warm over {len(sets)} sets: wall {walls[0]:.1f}x to {walls[-1]:.1f}x "
              f"(median {statistics.median(walls):.1f}x), CPU {cpus[0]:.1f}x to {cpus[-1]:.1f}x")  # fmt: skip
        ratio = walls[0]
    return 0 if ratio >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
