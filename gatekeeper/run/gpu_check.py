"""``gatekeeper gpu-check`` (``scripts/gpu_check.sh``): every stage at GPU sizes on whatever GPU is
present, every opt-in measurement on, then a one-page summary: what ran, what was measured, what
failed, and what was skipped and why.

Convergence parity needs a golden: the check first trains the same seeds on the CPU
(``functional_test --device cpu --golden-save``) and compares the device's loss curves and model
outputs with them, a cross-stack parity of the device against the CPU.

Without a GPU it runs the small CPU sizes and says so in its first line: a CPU run checks that
the whole flow works, it is not a GPU verdict. ``--sizes gpu|cpu`` forces either. A GPU job
(``GATEKEEPER_REQUIRE_DEVICE=1``) without a GPU is refused at once (exit 2): its verdict is known.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gatekeeper.contract.metric_points import split_point
from gatekeeper.contract.stage_names import STAGE_NAMES
from gatekeeper.contract.stage_report import StageReport, read_artifacts
from gatekeeper.contract.verdict import Verdict
from gatekeeper.core import proc
from gatekeeper.core.ci_context import PipelineContext
from gatekeeper.core.errors import InputError
from gatekeeper.core.files import atomic_write
from gatekeeper.run.pipeline import PipelineOptions, run_pipeline

__all__ = ["CPU_ARGS", "GPU_ARGS", "GpuCheckOptions", "GpuCheckResult", "detect_gpu", "run_gpu_check", "summarize"]

SUMMARY_FILE = "gpu_check.txt"
# The sizes of each stage: on a GPU the real ones (these take about an hour on one MI300X-class device),
# on a CPU the small ones (about 15 minutes on a 2-core runner; docs/performance.md has the measured cost).
GPU_ARGS: Mapping[str, Sequence[str]] = {
    "verify_hip": (),
    "functional_test": ("--seeds", "10", "--stability-loops", "3"),
    "performance_baseline": (
        "--processes", "5", "--iterations", "100", "--efficiency", "--copy-bandwidth",
        "--load", "qps=50,100,200", "--load-duration", "30s", "--max-batch", "8", "--max-wait-ms", "2",
    ),
    "compatibility_check": (),
}  # fmt: skip
CPU_ARGS: Mapping[str, Sequence[str]] = {
    "verify_hip": (),
    "functional_test": ("--seeds", "2", "--checkpoint-trials", "2", "--stability-loops", "2"),
    "performance_baseline": (
        "--processes", "3", "--iterations", "20", "--efficiency", "--copy-bandwidth",
        "--load", "qps=5,20", "--load-duration", "3s",
    ),
    "compatibility_check": ("--collective-max-mb", "4", "--bandwidth-sizes", "1,4"),
}  # fmt: skip
# convergence runs, trained on the CPU for the golden first and then on the device (same seeds)
GPU_TRAIN = ("--train-steps", "100", "--train-seeds", "3")
CPU_TRAIN = ("--train-steps", "10", "--train-seeds", "3")
SIZES = ("auto", "gpu", "cpu")
_MAX_LINES = 10  # per list on the page (failed checks, skip reasons)


@dataclass(frozen=True)
class GpuCheckOptions:
    out: Path = Path("artifacts/gpu_check")
    gates: Path = Path("gates.yaml")
    device: str = "auto"
    sizes: str = "auto"
    model: str | None = None
    stage_timeout: float = 7200.0


@dataclass(frozen=True)
class GpuCheckResult:
    verdict: Verdict
    sizes: str  # "gpu" or "cpu"
    device_line: str
    summary: str
    summary_path: Path
    golden: str  # where the convergence golden came from, or why there is none


def detect_gpu(environ: Mapping[str, str]) -> tuple[bool, str]:
    """(a GPU is usable by torch, one line saying which or why not), asked of torch in a child process."""
    from gatekeeper.machine.snapshot import take_snapshot

    snap = take_snapshot(environ=environ, tools_to_run={}, timeout=60.0)
    info = snap.torch or {}
    if info.get("error"):
        return False, f"no GPU: torch failed to start ({info['error']})"
    if not info:
        run = snap.tools.get("torch")
        return False, f"no GPU: the torch probe {run.status if run else 'did not run'} ({run.detail if run else ''})"
    if not info.get("available"):
        build = "HIP" if info.get("hip") else ("CUDA" if info.get("cuda") else "CPU-only")
        return False, f"no GPU: torch {info.get('version')} ({build} build) sees none"
    names = [d.get("name") or "?" for d in info.get("devices") or []]
    stack = f"HIP {info['hip']}" if info.get("hip") else f"CUDA {info.get('cuda')}"
    return True, f"{len(names)} GPU(s): {', '.join(dict.fromkeys(names))} (torch {info.get('version')}, {stack})"


def run_gpu_check(
    options: GpuCheckOptions, environ: Mapping[str, str], log: Callable[[str], None] = lambda _line: None
) -> GpuCheckResult:
    """Every stage, then the summary; ``log`` gets a heading before each step (the CLI passes the terminal
    writer; nothing here prints)."""
    if options.sizes not in SIZES:
        raise InputError(None, "--sizes", f"unknown sizes {options.sizes!r}", f"use {', '.join(SIZES)}")
    gpu, line = (False, "--device cpu was requested") if options.device == "cpu" else detect_gpu(environ)
    if not gpu and PipelineContext.from_env(environ).require_device:
        # known to fail (the built-in gpu-verified gate blocks a GPU job whose stages ran without a GPU): said
        # now, not after every stage ran at the CPU sizes (minutes of a runner for a verdict known in advance)
        raise InputError(
            None,
            "gpu-check",
            f"GATEKEEPER_REQUIRE_DEVICE=1 (a GPU job) but {line}",
            "run the job on a GPU runner (its tags, /dev/kfd and /dev/dri or the NVIDIA driver, a GPU build of "
            "torch; gatekeeper doctor says which is missing), or set device_required: false for a CPU job",
        )
    sizes = options.sizes if options.sizes != "auto" else ("gpu" if gpu else "cpu")
    args = {k: list(v) for k, v in (GPU_ARGS if sizes == "gpu" else CPU_ARGS).items()}
    train = list(GPU_TRAIN if sizes == "gpu" else CPU_TRAIN)
    log(f"gatekeeper gpu-check: {line}; running the {sizes.upper()} sizes")
    options.out.mkdir(parents=True, exist_ok=True)
    golden, golden_line = cpu_golden(options, train, environ, log=log)
    args["functional_test"] += [*train, *(["--golden", str(golden)] if golden else [])]
    verdict = run_pipeline(
        PipelineOptions(
            out=options.out,
            gates=options.gates,
            device=options.device,
            model=options.model,
            stage_args=args,
            stage_timeout=options.stage_timeout,
        ),
        environ,
        log=log,
    )
    reports = read_artifacts(options.out)
    text = summarize(reports, verdict, sizes=sizes, device_line=line, gpu=gpu, golden=golden_line)
    path = atomic_write(options.out / SUMMARY_FILE, text)
    return GpuCheckResult(verdict, sizes, line, text, path, golden_line)


def cpu_golden(
    options: GpuCheckOptions,
    train: Sequence[str],
    environ: Mapping[str, str],
    log: Callable[[str], None] = lambda _line: None,
) -> tuple[Path | None, str]:
    """Train the convergence seeds on the CPU and save them (and the model's outputs) as a golden."""
    golden = options.out / "golden-cpu"
    argv = [
        sys.executable, "-m", "stages.functional_test", "--device", "cpu", "--out", str(options.out / "golden-cpu-run"),
        "--categories", "none", "--no-traced", "--no-sparse", "--checkpoint-trials", "0", *train,
        "--golden-save", str(golden), *(["--model", options.model] if options.model else []),
    ]  # fmt: skip
    log("\n== gatekeeper gpu-check: the convergence golden, trained on the CPU")
    result = proc.run_passthrough(argv, timeout=options.stage_timeout, env=environ)
    if result.returncode == 0 and (golden / "convergence.json").is_file():
        return golden, f"CPU golden in {golden}"
    return None, f"no golden: the CPU golden run {result.describe()} (see {options.out / 'golden-cpu-run'})"


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _points(report: StageReport, base: str) -> list[tuple[dict[str, str], float | None, str]]:
    """(point, value, description) of every ``base[...]`` metric without a statistic suffix."""
    out = []
    for name, m in report.metrics.items():
        parts = split_point(name)
        if parts and parts[0] == base and not parts[2]:
            out.append((parts[1], m.value, m.description))
    return out


def _measured(reports: Mapping[str, StageReport]) -> list[str]:
    lines: list[str] = []
    verify = reports.get("verify_hip")
    if verify is not None:
        link = (verify.summary.get("pcie") or {}).get("link")
        check = next((c for c in verify.checks if c.name == "hygiene.pcie_link"), None)
        if link:
            cur, top = link["current"], link["max"]
            lines.append(
                f"  pcie link     Gen{cur['generation']} x{cur['width']} of Gen{top['generation']} x{top['width']}"
                + (" (BELOW ITS MAXIMUM)" if link.get("below_max") else "")
            )
        elif check is not None:
            lines.append(f"  pcie link     {check.status}: {check.message.splitlines()[0]}")
    perf = reports.get("performance_baseline")
    if perf is not None:
        eff = {(p["op"], p["dtype"]): v for p, v, _ in _points(perf, "compute_efficiency")}
        for op in ("matmul", "conv2d"):
            cells = []
            for p, v, _ in sorted(_points(perf, "tflops"), key=lambda t: t[0].get("dtype", "")):
                if p.get("op") != op:
                    continue
                share = eff.get((op, p["dtype"]))
                cells.append(f"{p['dtype']} {_fmt(v)}" + (f" ({share:.0%})" if share is not None else ""))
            if cells:
                lines.append(f"  {op + ' TFLOPS':<13} " + ", ".join(cells))
        copies = [
            f"{p['dir']} {p['size_mb']} MB {'pinned' if p['pinned'] == 'true' else 'pageable'} {_fmt(v)}"
            for p, v, _ in _points(perf, "copy_bandwidth_gbps")
            if p.get("size_mb") == "64" or v is not None
        ]
        if copies:
            measured = [c for c in copies if not c.endswith(" -")]
            lines.append("  copy GB/s     " + (", ".join(measured[:4]) if measured else "not measured (see skipped)"))
        for row in (perf.summary.get("load") or {}).get("rates", []):
            label = f"load {row['qps']:g}/s"
            if row.get("status") == "measured":
                lines.append(
                    f"  {label:<13} P50 {_fmt(row.get('p50_ms'))} ms, P99 {_fmt(row.get('p99_ms'))} ms, "
                    f"{row['achieved_qps']:g} answered/s, {row['timeouts']} timeouts, {row['errors']} errors"
                )
            else:
                lines.append(f"  {label:<13} {row.get('status')}: {row.get('reason', '')}")
    func = reports.get("functional_test")
    if func is not None:
        m = func.metrics
        if "convergence_final_loss" in m:
            dist = m.get("convergence_curve_distance")
            lines.append(
                f"  convergence   final loss {_fmt(m['convergence_final_loss'].value)} "
                f"(spread {_fmt(m['convergence_final_loss_spread'].value)} over seeds)"
                + (f", curve distance {_fmt(dist.value)} from the golden" if dist else ", no golden to compare")
            )
        if "train_interruptions" in m:
            kinds = [f"{p['kind']} {v:g}" for p, v, _ in _points(func, "train_interruptions") if v]
            growth = m.get("memory_growth_mb_per_epoch")
            lines.append(
                f"  stability     {m['train_interruptions'].value:g} interruptions"
                + (f" ({', '.join(kinds)})" if kinds else "")
                + (f", memory {growth.value:+.2f} MB/epoch" if growth and growth.value is not None else "")
            )
    return lines


def summarize(
    reports: Mapping[str, StageReport],
    verdict: Verdict,
    *,
    sizes: str,
    device_line: str,
    gpu: bool,
    golden: str = "",
) -> str:
    """The one page: device and sizes, per-stage counts, the measurements, failures, skip reasons, verdict."""
    head = (
        f"gatekeeper gpu-check: {device_line}"
        if gpu or sizes == "gpu"
        else f"gatekeeper gpu-check: {device_line}. Small CPU sizes: this checks the flow, it is not a GPU verdict."
    )
    lines = [head, f"sizes: {sizes.upper()}" + (f"; convergence: {golden}" if golden else ""), ""]
    lines.append(f"{'stage':<22}{'status':<9}{'passed':>7}{'failed':>7}{'skipped':>8}{'time':>9}")
    failed: list[str] = []
    skipped: Counter[str] = Counter()
    order = {name: i for i, name in enumerate(STAGE_NAMES)}
    for name, r in sorted(reports.items(), key=lambda kv: order.get(kv[0], len(order))):
        c = r.counts()
        bad = c["failed"] + c["error"]
        lines.append(f"{name:<22}{r.status:<9}{c['passed']:>7}{bad:>7}{c['skipped']:>8}{r.duration_s:>8.0f}s")
        for check in r.checks:
            first = check.message.strip().splitlines()[0] if check.message.strip() else ""
            if check.status in ("failed", "error"):
                failed.append(f"  {name}: {check.name}: {first[:150]}")
            elif check.status == "skipped":
                skipped[f"{name}: {first[:150]}"] += 1
    lines += ["", "measured", *(_measured(reports) or ["  nothing beyond the stage checks"])]
    lines += ["", f"failed checks ({len(failed)})", *(failed[:_MAX_LINES] or ["  none"])]
    if len(failed) > _MAX_LINES:
        lines.append(f"  ... and {len(failed) - _MAX_LINES} more (see each stage's .junit.xml)")
    lines += ["", f"skipped checks ({sum(skipped.values())}), by reason"]
    for reason, n in skipped.most_common(_MAX_LINES):
        lines.append(f"  {n:>3} x {reason}")
    if len(skipped) > _MAX_LINES:
        lines.append(f"  ... and {len(skipped) - _MAX_LINES} more reasons")
    blocking = [g.name for g in verdict.blocking_gates]
    lines += [
        "",
        f"verdict: {verdict.result} (exit {int(verdict.exit_code)})" + (f": {', '.join(blocking)}" if blocking else ""),
    ]
    return "\n".join(lines) + "\n"
