"""compatibility_check: does the model still leave the building? ONNX export
validated in onnxruntime, torch.compile against eager with a warm kernel cache,
collectives across processes with deadlock detection and their bus bandwidth, a C++ (and HIP/CUDA)
extension build, sparse tensors on the device, dependencies and the nightly guard.

Each risky check runs isolated (a worker or separate rank processes) with a
timeout, so a crash or a hang is a failed check and the stage goes on.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from gatekeeper.contract.failures import CheckKind, MetricKind
from gatekeeper.core.errors import InputError
from gatekeeper.kernel_cache.key import cache_env
from stages._stage import StageContext, stage_main
from stages.compat import dependencies as deps
from stages.compat.bandwidth import parse_sizes, record_bandwidth
from stages.compat.collectives import COLLECTIVES, parse_plant, run_collectives
from stages.isolate import IsolatedOutcome, Worker

NAME = "compatibility_check"
DESCRIPTION = (
    "ONNX export in onnxruntime, torch.compile vs eager, collectives with deadlock detection, "
    "C++/HIP extensions, sparse tensors, dependencies and the nightly guard."
)


@dataclass(frozen=True)
class Options:
    onnx_atol: float = 1e-4
    no_compile: bool = False
    compile_timeout: float = 600.0
    compile_atol: float = 1e-4
    compile_no_grad: bool = False
    world_size: int = 2
    collective_timeout: float = 60.0
    collective_max_mb: float = 64.0
    bandwidth_sizes: str = "auto"
    bandwidth_iters: int = 5
    plant_deadlock: str | None = None
    no_extension: bool = False
    downstream: str = ""


# Every check and metric this stage writes, with the failure category of each (contract/failures.py).
CHECKS = (
    CheckKind(
        "onnx.onnxruntime",
        "numerical_mismatch",
        "onnxruntime reproduces the model's outputs",
        "compare the exported graph's outputs op by op (onnxruntime's verbose session log names the node)",
    ),
    CheckKind(
        "onnx.*",
        "compile_error",
        "the model exports to a valid ONNX graph (dynamo, then TorchScript)",
        "read the exporter's error in the message: an op without an ONNX symbolic, or a dynamic shape it refuses",
    ),
    CheckKind(
        "compile.*",
        "compile_error",
        "torch.compile builds the model and matches eager",
        "rerun with TORCH_LOGS=+dynamo,+inductor; a compiled-vs-eager mismatch names the max error in the message",
    ),
    CheckKind(
        "collectives.*",
        "collective_comm_error",
        "collectives in separate rank processes finish and give the right result (a rank that never joins is a "
        "deadlock, found by timeout)",
        "rerun with NCCL_DEBUG=INFO (RCCL too); check the network interface (NCCL_SOCKET_IFNAME) and /dev/shm",
        on_timeout="collective_comm_error",
    ),
    CheckKind(
        "extension.*",
        "compile_error",
        "a C++ (and HIP/CUDA) extension builds and runs",
        "check the compiler and the ROCm/CUDA toolkit the extension build found (hipcc/nvcc, headers)",
    ),
    CheckKind(
        "sparse.*",
        "numerical_mismatch",
        "sparse COO/CSR operations on the device vs dense CPU",
        "check whether the sparse op is implemented for this device",
    ),
    CheckKind(
        "dependencies.*",
        "library_mismatch",
        "pip check is clean and the downstream tools import with this torch",
        "install versions that fit together (pip check names the conflict)",
    ),
    CheckKind(
        "nightly_guard*",
        "library_mismatch",
        "a nightly torch is not shipped to a repository with an onnxruntime or TensorRT downstream",
        "test the stable channel for this repository, or drop the downstream from --downstream",
    ),
)
METRICS = (
    MetricKind("onnx_export_rate", "compile_error", "1 when the model exported and onnxruntime reproduced it"),
    MetricKind("onnx_max_abs_error", "numerical_mismatch", "onnxruntime vs torch"),
    MetricKind("compile_max_abs_error", "numerical_mismatch", "compiled vs eager"),
    MetricKind("compile_*", "performance_regression", "compile time and kernel cache hits"),
    MetricKind("collectives_pass_rate", "collective_comm_error", "share of collectives that passed"),
    MetricKind("deadlocks", "collective_comm_error", "collectives a rank never joined"),
    MetricKind("collective_busbw_gbps*", "performance_regression", "collective bus bandwidth"),
    MetricKind("extension_build_ok", "compile_error", "1 when the C++ (and GPU) extension built"),
    MetricKind("sparse_pass_rate", "numerical_mismatch", "share of sparse cases that passed"),
    MetricKind("dependency_problems", "library_mismatch", "pip check and downstream problems"),
    MetricKind("nightly_guard_violations", "library_mismatch", "nightly torch with a guarded downstream"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("compatibility_check")
    g.add_argument("--onnx-atol", type=float, default=1e-4, help="onnxruntime vs torch max abs error (default 1e-4)")
    g.add_argument("--no-compile", action="store_true", help="skip the torch.compile check (recorded as skipped)")
    g.add_argument("--compile-timeout", type=float, default=600.0, help="seconds for the compile (default 600)")
    g.add_argument("--compile-atol", type=float, default=1e-4, help="compiled vs eager max abs error (default 1e-4)")
    g.add_argument(
        "--compile-no-grad", action="store_true", help="compile and compare under torch.no_grad (inference path)"
    )
    g.add_argument("--world-size", type=int, default=2, help="processes in the collectives check (default 2)")
    g.add_argument(
        "--collective-timeout", type=float, default=60.0, help="seconds before a collective counts as deadlocked"
    )
    g.add_argument("--collective-max-mb", type=float, default=64.0, help="largest tensor per rank, MiB (default 64)")
    g.add_argument(
        "--bandwidth-sizes",
        default="auto",
        help="MiB per collective for the bus bandwidth of all_reduce, all_gather, reduce_scatter: comma list, "
        "auto (CPU 1,8,64; GPU 1,2,4,...,256) or none",
    )
    g.add_argument("--bandwidth-iters", type=int, default=5, help="timed iterations per size (default 5)")
    g.add_argument(
        "--plant-deadlock",
        metavar="RANK:COLLECTIVE",
        help="self-test: that rank never joins that collective; the check must fail naming it, within the timeout",
    )
    g.add_argument("--no-extension", action="store_true", help="skip the C++/HIP extension build")
    g.add_argument(
        "--downstream", default="", help="tools the model ships to, e.g. onnxruntime,tensorrt: absent = failed"
    )


def _validate(ctx: StageContext) -> tuple[str, tuple[str, ...], tuple[int, ...] | None]:
    from stages.models import parse_shape

    o = ctx.options
    if o.world_size < 2:
        raise InputError(None, "--world-size", f"{o.world_size} is below 2", "collectives need at least 2 processes")
    if o.bandwidth_iters < 1:
        raise InputError(None, "--bandwidth-iters", f"{o.bandwidth_iters} is below 1", "e.g. --bandwidth-iters 5")
    parse_sizes(o.bandwidth_sizes, gpu=ctx.device.is_gpu)  # a bad list is exit 2 before any work
    for flag, value in (("--collective-timeout", o.collective_timeout), ("--collective-max-mb", o.collective_max_mb)):
        if value <= 0:
            raise InputError(None, flag, f"{value:g} is not positive", f"e.g. {flag} 60")
    plant, downstream, shape = (
        parse_plant(o.plant_deadlock, o.world_size),
        deps.parse_downstream(o.downstream),
        parse_shape(ctx.common.input_shape),
    )
    # Load the model here once, so a bad --model/--input-shape is exit 2 with one line, not an error per worker.
    ctx.model().example_input(1, shape, ctx.common.seed)
    return plant, downstream, shape


def _record_checks(ctx: StageContext, outcome: IsolatedOutcome, name: str) -> list[dict[str, Any]]:
    """Record the checks an isolated call returned; a crash, timeout or exception fails ``name``."""
    if not outcome.ok:
        ctx.rec.outcome(name, outcome)
        return []
    checks = outcome.value["checks"]
    for c in checks:
        ctx.rec.record(
            c["name"], c["status"], c["message"], duration_s=c.get("duration_s", 0.0), details=c.get("details")
        )
    return checks


def _model_args(ctx: StageContext, shape: tuple[int, ...] | None) -> dict[str, Any]:
    c = ctx.common
    return {"model_spec": c.model, "seed": c.seed, "batch_size": c.batch_size, "input_shape": shape}


def check_onnx(ctx: StageContext, shape: tuple[int, ...] | None) -> None:
    from stages.compat.onnx_export import missing_reason

    rec = ctx.rec
    with rec.group("onnx", "ONNX export validated in onnxruntime"):
        reason = missing_reason()
        if reason:
            rec.skip("onnx.export", reason)
            rec.metric("onnx_export_rate", None, "ratio", "higher", description=f"skipped: {reason}")
            rec.metric("onnx_max_abs_error", None, "abs", "lower", description=f"skipped: {reason}")
            return
        out_dir = str(ctx.out_dir / NAME / "onnx")
        with Worker() as worker:
            outcome = worker.call(
                "stages.compat.onnx_export:export_and_validate",
                timeout=ctx.common.check_timeout,
                out_dir=out_dir,
                atol=ctx.options.onnx_atol,
                **_model_args(ctx, shape),
            )
        checks = _record_checks(ctx, outcome, "onnx.export")
        ok = bool(checks) and all(c["status"] == "passed" for c in checks)
        rec.metric("onnx_export_rate", 1.0 if ok else 0.0, "ratio", "higher", description="exported, valid, matching")
        err = outcome.value["max_abs_error"] if outcome.ok else None
        rec.metric("onnx_max_abs_error", err, "abs", "lower", description="onnxruntime CPU vs torch")
        if outcome.ok:
            rec.summary["onnx"] = {"exporter": outcome.value["exporter"], "model_dir": out_dir}


def check_compile(ctx: StageContext, shape: tuple[int, ...] | None, env: dict[str, str]) -> None:
    rec, o = ctx.rec, ctx.options
    with rec.group("compile", "torch.compile (inductor) vs eager"):
        if o.no_compile:
            rec.skip("compile.inductor", "--no-compile was given")
            for m in ("compile_time_s", "compile_cache_hit", "compile_max_abs_error"):
                rec.metric(m, None, "s" if m.endswith("_s") else "", "none", description="skipped: --no-compile")
            return
        with Worker(env=env) as worker:
            outcome = worker.call(
                "stages.compat.compile_check:compile_and_compare",
                timeout=o.compile_timeout,
                device=ctx.device.torch_device,
                atol=o.compile_atol,
                no_grad=o.compile_no_grad,
                **_model_args(ctx, shape),
            )
        d: dict[str, Any] = {}
        if outcome.ok:
            v = outcome.value
            d = v["details"]
            rec.record("compile.inductor", v["status"], v["message"], duration_s=outcome.duration_s, details=d)
        else:
            rec.outcome("compile.inductor", outcome)
        hit = d.get("cache_hit")
        rec.metric("compile_time_s", d.get("compile_time_s"), "s", "lower", description="first compiled call")
        rec.metric("compile_cache_hit", None if hit is None else float(hit), "bool", "higher")
        rec.metric("compile_max_abs_error", d.get("max_abs_error"), "abs", "lower", description="compiled vs eager")


def check_collectives(ctx: StageContext, plant: str) -> None:
    rec, o, info = ctx.rec, ctx.options, ctx.device
    sizes = parse_sizes(o.bandwidth_sizes, gpu=info.is_gpu)
    with rec.group("collectives", f"collectives on {o.world_size} processes"):
        backend = "gloo"
        if info.is_gpu and info.count >= o.world_size:
            backend = "nccl"  # RCCL on ROCm: torch calls both "nccl"
        elif info.is_gpu:
            why = f"{info.count} GPU(s) < world size {o.world_size}: one process per GPU is required"
            rec.skip("collectives.nccl", f"{why}; gloo on CPU instead")
        skip_bandwidth = "--bandwidth-sizes none" if not sizes else ""
        if info.is_gpu and backend == "gloo":  # gloo between CPU processes says nothing about this GPU's links
            skip_bandwidth, sizes = f"no NCCL/RCCL bandwidth to measure: {why}", ()
        if plant:
            rec.log(f"  self-test: rank {plant.replace(':', ' never joins ')} (--plant-deadlock)")
        result = run_collectives(
            world_size=o.world_size,
            backend=backend,
            max_mb=o.collective_max_mb,
            timeout=o.collective_timeout,
            workdir=ctx.out_dir / NAME / "collectives",
            plant=plant,
            bandwidth_mb=sizes,
            bandwidth_iters=o.bandwidth_iters,
        )
        for r in result.results:
            rec.record(f"collectives.{r.name}", r.status, r.message, duration_s=r.duration_s, details=r.details)
        if any(r.status == "failed" for r in result.results):
            for rank, tail in enumerate(result.rank_stderr):
                if tail.strip():
                    rec.log(f"  --- rank {rank} ({result.rank_exits[rank]}), last lines ---\n{tail}")
        cleanup = f"{result.processes_left} rank process(es) outlived the check" if result.processes_left else ""
        with rec.check("collectives.cleanup") as h:
            h.details = {"rank_exits": list(result.rank_exits), "elapsed_s": round(result.elapsed_s, 3)}
            assert not cleanup, cleanup
            h.message = f"all {o.world_size} rank processes ended ({result.elapsed_s:.1f} s)"
        rec.metric("collectives_pass_rate", result.pass_rate(), "ratio", "higher", description=f"{backend}")
        rec.metric(
            "deadlocks", float(result.deadlocks), "count", "lower", description="collectives a rank never joined"
        )
        bandwidth = record_bandwidth(rec, result, sizes, skip_reason=skip_bandwidth)
        rec.summary["collectives"] = {
            "bandwidth": bandwidth,
            "backend": backend,
            "world_size": o.world_size,
            "max_mb": o.collective_max_mb,
            "timeout_s": o.collective_timeout,
            "results": {r.name: r.status for r in result.results},
        }


def check_extension(ctx: StageContext, env: dict[str, str]) -> None:
    rec = ctx.rec
    with rec.group("extension", "C++/HIP extension build (load_inline)"):
        if ctx.options.no_extension:
            rec.skip("extension.cpp", "--no-extension was given")
            rec.metric("extension_build_ok", None, "bool", "higher", description="skipped: --no-extension")
            return
        with Worker(env=env) as worker:
            outcome = worker.call(
                "stages.compat.extension:build_and_call",
                timeout=ctx.common.check_timeout,
                gpu=ctx.device.is_gpu,
                device=ctx.device.torch_device,
            )
        checks = _record_checks(ctx, outcome, "extension.cpp")
        if not ctx.device.is_gpu:
            rec.skip("extension.gpu", f"no GPU for a HIP/CUDA kernel: {ctx.device.no_gpu_reason()}")
        if outcome.kind == "raised" and outcome.error_type == "SkipCheck":
            rec.metric("extension_build_ok", None, "bool", "higher", description="skipped: no toolchain")
            return
        ran = [c for c in checks if c["status"] != "skipped"]
        ok = bool(ran) and all(c["status"] == "passed" for c in ran)
        rec.metric("extension_build_ok", 1.0 if ok else 0.0, "bool", "higher")


def check_sparse(ctx: StageContext) -> None:
    from stages.compat.sparse import SPARSE_CASES

    rec = ctx.rec
    with rec.group("sparse", f"sparse tensors on {ctx.device.torch_device}"), Worker() as worker:
        statuses = []
        for case in SPARSE_CASES:
            outcome = worker.call(
                "stages.compat.sparse:sparse_case", case, ctx.device.torch_device, timeout=ctx.common.check_timeout
            )
            statuses.append(rec.outcome(f"sparse.{case}", outcome).status)
        ran = [s for s in statuses if s != "skipped"]
        rate = sum(s == "passed" for s in ran) / len(ran) if ran else None
        rec.metric("sparse_pass_rate", rate, "ratio", "higher", description=f"{len(ran)} sparse cases")


def check_dependencies(ctx: StageContext, downstream: tuple[str, ...]) -> None:
    rec = ctx.rec
    with rec.group("dependencies", "pip check, versions, downstream tools, nightly guard"):
        problems, note = deps.pip_check(timeout=ctx.common.check_timeout)
        if problems is None:
            rec.skip("dependencies.pip_check", note)
        else:
            msg = "; ".join(problems) if problems else "no broken requirements"
            rec.record(
                "dependencies.pip_check", "failed" if problems else "passed", msg, details={"problems": problems}
            )
        versions = deps.installed_versions()
        absent = [t for t, v in versions.items() if v is None]
        listing = ", ".join(f"{t} {v}" for t, v in versions.items() if v)
        rec.record("dependencies.versions", "passed", listing + (f"; absent: {', '.join(absent)}" if absent else ""))
        rec.summary["versions"] = versions
        failed = 0
        for tool in downstream:
            status = deps.check_downstream(tool, problems or [], timeout=ctx.common.check_timeout)
            rec.record(f"dependencies.downstream.{tool}", "passed" if status.ok else "failed", status.message)
            failed += not status.ok
        rec.summary["downstream"] = list(downstream)
        count = len(problems or []) + failed
        rec.metric("dependency_problems", float(count), "count", "lower", description="pip check + downstream")

        channel = ctx.environment.channel
        violations = deps.nightly_guard(channel, downstream)
        for tool in violations:
            rec.record(
                f"nightly_guard.{tool}",
                "failed",
                f"nightly torch {ctx.environment.torch_version} must not ship to {tool}: nightly builds are not "
                f"validated against onnxruntime/TensorRT (hard exclusion rule); waive in gates.yaml if intended",
            )
        if not violations and channel != "nightly":
            rec.record("nightly_guard", "info", "not applicable: stable channel")
        elif not violations:
            rec.record("nightly_guard", "passed", "no onnxruntime/TensorRT downstream declared")
        rec.metric("nightly_guard_violations", float(len(violations)), "count", "lower", description=f"{channel}")


def run(ctx: StageContext) -> None:
    plant, downstream, shape = _validate(ctx)
    env = cache_env()
    ctx.config["kernel_cache"] = {k: env[k] for k in ("TORCHINDUCTOR_CACHE_DIR", "TORCH_EXTENSIONS_DIR")}
    ctx.config["collectives"] = list(COLLECTIVES)
    check_onnx(ctx, shape)
    check_compile(ctx, shape, env)
    check_collectives(ctx, plant)
    check_extension(ctx, env)
    check_sparse(ctx)
    check_dependencies(ctx, downstream)


def main(argv: list[str] | None = None) -> int:
    return stage_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
