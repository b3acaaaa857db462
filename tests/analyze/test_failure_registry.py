"""The registry is the source (issue 28): every check kind and metric kind a stage declares has a
failure category, every gate of the default gates resolves to one, the recorder refuses a check or
a metric that no kind declares, and the schemas know exactly the taxonomy's categories."""

from __future__ import annotations

import io
import re

import pytest

from gatekeeper.analyze import structured
from gatekeeper.analyze.rules import load_rules
from gatekeeper.contract.failures import CATEGORIES, CheckKind, MetricKind, UndeclaredName, find_kind
from gatekeeper.contract.schemas import load_schema
from gatekeeper.evaluate.gates import load_gates
from gatekeeper.evaluate.metrics import CHECK_COUNTS, STATISTICS
from gatekeeper.machine.hygiene import DeviceNode, FsFacts, hygiene_findings
from stages import STAGES, load_stage
from stages._stage import FRAMEWORK_CHECKS, Recorder
from stages.isolate import IsolatedOutcome
from tests.conftest import REPO

FAILURE_CATEGORIES = set(CATEGORIES) - {"unknown"}
GATE_FILES = [REPO / "gates.yaml", REPO / "gatekeeper" / "evaluate" / "default_gates.yaml"]


def _declared(stage: str) -> tuple[tuple[CheckKind, ...], tuple[MetricKind, ...]]:
    module = load_stage(stage)
    return tuple(module.CHECKS) + FRAMEWORK_CHECKS, tuple(module.METRICS)


@pytest.mark.parametrize("stage", list(STAGES))
def test_every_declared_kind_has_a_category(stage: str) -> None:
    checks, metrics = _declared(stage)
    assert checks, f"{stage} declares no CHECKS"
    assert metrics, f"{stage} declares no METRICS"
    for kind in checks:
        assert kind.category in FAILURE_CATEGORIES, (stage, kind.pattern)
        assert kind.on_timeout in FAILURE_CATEGORIES, (stage, kind.pattern)
        assert kind.what, (stage, kind.pattern)
        assert kind.fix, (stage, kind.pattern)
    for metric in metrics:
        assert metric.category in FAILURE_CATEGORIES, (stage, metric.pattern)


def test_a_kind_without_a_category_cannot_be_declared() -> None:
    with pytest.raises(ValueError, match="not a failure category"):
        CheckKind("x.*", "unknown", "what", "fix")
    with pytest.raises(ValueError, match="not a failure category"):
        MetricKind("x", "", "what")
    with pytest.raises(ValueError, match="say what it checks"):
        CheckKind("x.*", "segfault", "", "")


def _metric_name(metric: str) -> str:
    """The metric a gate reads, without a statistic suffix or a sweep pattern."""
    name = metric.split(".", 1)[1]
    name = name.replace("[*]", "[batch_size=8]")
    base, _, stat = name.rpartition(".")
    return base if stat in STATISTICS or stat in ("ci_low", "ci_high") else name


@pytest.mark.parametrize("path", GATE_FILES, ids=lambda p: p.name)
def test_every_default_gate_has_a_category(path) -> None:
    for gate in load_gates(path).gates:
        assert gate.metric, f"{gate.name}: a default gate reads a stage metric"
        assert not gate.junit, f"{gate.name}: a default gate reads a stage metric"
        stage, _, name = gate.metric.partition(".")
        assert stage in STAGES, gate.name
        checks, metrics = _declared(stage)
        if name.startswith("checks.") and name.split(".", 1)[1] in CHECK_COUNTS:
            assert checks, f"{gate.name}: counts {stage}'s checks, which declare no kind"
            continue
        kind = find_kind(_metric_name(gate.metric), metrics) or find_kind(name, metrics)
        assert kind is not None, f"gate {gate.name}: {gate.metric} matches no metric kind {stage} declares"
        assert kind.category in FAILURE_CATEGORIES


def test_the_built_in_gate_has_a_category() -> None:
    # gatekeeper.evaluate.decide adds gpu-verified, whatever gates.yaml says
    assert structured._BUILT_IN["environment.device_kind"] == "device_not_available"


def _check_names() -> dict[str, list[str]]:
    """Check names the stages record, enumerated from their own catalogs and code paths."""
    from stages.compat.collectives import COLLECTIVES
    from stages.compat.sparse import SPARSE_CASES as COMPAT_SPARSE
    from stages.functional.attention import cases as attention_cases
    from stages.functional.catalog import all_cases
    from stages.functional.distributed import case_names
    from stages.functional.sparse import SPARSE_CASES
    from stages.verify_hip import SMOKE

    node = DeviceNode("/dev/kfd", False, False, False, None)
    fs = FsFacts(node, DeviceNode("/dev/dri", False, False, False, None))
    hygiene = set()
    for env in ({}, {"HSA_OVERRIDE_GFX_VERSION": "x", "PYTORCH_HIP_ALLOC_CONF": "a", "HIP_VISIBLE_DEVICES": ""},
                {"HIP_VISIBLE_DEVICES": "-1", "CUDA_VISIBLE_DEVICES": "", "PYTORCH_CUDA_ALLOC_CONF": "x:1",
                 "PYTORCH_HIP_ALLOC_CONF": "y:1"}):  # fmt: skip
        hygiene |= {f.check for f in hygiene_findings(env, fs, amd=True)}
    return {
        "verify_hip": [
            "device.visible", "device.memory", "torch.build", "arch.compatible", "versions.rocm", "versions.driver",
            *(f"smoke.{k}" for k in SMOKE), *sorted(hygiene), "hygiene.pcie_link", "stage", "stage.config",
        ],
        "functional_test": [
            *all_cases(), *(c.name for c in attention_cases()),
            *(f"distributed.{n}" for n in case_names()), "user.case_x", "traced", "traced.capture",
            "traced.aten::add.Tensor", "traced.model.forward_backward", "checkpoint", "checkpoint.trial0",
            "sparse", *(f"sparse.{n}" for n in SPARSE_CASES), "golden.save", "golden.compare", "opinfo.sweep",
            "opinfo.remaining", "opinfo.add.default", "convergence", "convergence.seed.1", "convergence.parity",
            "convergence.spread", "stability", "stability.loop.1", "stability.memory_growth", "stage", "stage.config",
        ],
        "performance_baseline": [
            "process.1", "point[batch_size=8].process.2", "point[batch_size=8]", "clocks_and_temperature",
            "memory_growth", "soak", "soak.decay", "copy[dir=h2d,pinned=true,size_mb=64]",
            "efficiency[dtype=float32,op=mm]", "load[qps=50]", "stage", "stage.config",
        ],
        "compatibility_check": [
            "onnx.export", "onnx.checker", "onnx.onnxruntime", "compile.inductor", "collectives.nccl",
            *(f"collectives.{c}" for c in COLLECTIVES), "collectives.cleanup", "collectives.bandwidth",
            "extension.cpp", "extension.gpu", *(f"sparse.{c}" for c in COMPAT_SPARSE), "dependencies.pip_check",
            "dependencies.versions", "dependencies.downstream.onnxruntime", "nightly_guard", "nightly_guard.onnxruntime",
            "stage", "stage.config",
        ],
    }  # fmt: skip


@pytest.mark.parametrize("stage", list(STAGES))
def test_every_check_the_stage_records_is_declared(stage: str) -> None:
    checks, _ = _declared(stage)
    names = _check_names()[stage]
    assert len(names) > 5
    undeclared = [n for n in names if find_kind(n, checks) is None]
    assert not undeclared, f"{stage}: {undeclared}"


def test_the_recorder_refuses_an_undeclared_check_or_metric() -> None:
    rec = Recorder("verify_hip", io.StringIO())
    with pytest.raises(UndeclaredName, match=r"verify_hip\.CHECKS"):
        rec.record("brand_new.check", "passed")
    with pytest.raises(UndeclaredName, match=r"verify_hip\.METRICS"):
        rec.metric("brand_new_metric", 1.0, "ratio")
    assert not rec.checks
    assert not rec.metrics


def test_a_failed_check_carries_its_category_and_fix() -> None:
    rec = Recorder("verify_hip", io.StringIO())
    passed = rec.record("smoke.matmul", "passed", "ok")
    failed = rec.record("smoke.conv2d", "failed", "conv2d: max relative error 0.3 > 0.0001 on cuda")
    timed_out = rec.outcome("smoke.reduction", IsolatedOutcome("timeout", message="timed out after 5 s"))
    crashed = rec.outcome("smoke.matmul", IsolatedOutcome("crashed", message="worker killed by SIGSEGV"))
    faulted = rec.outcome(
        "smoke.matmul", IsolatedOutcome("crashed", message="worker killed by SIGABRT: Memory access fault by GPU")
    )
    assert passed.category is None
    assert not passed.fix
    assert (failed.category, timed_out.category) == ("numerical_mismatch", "gpu_hang_or_timeout")
    assert (crashed.category, faulted.category) == ("segfault", "illegal_memory_access")
    assert failed.fix
    assert failed.to_dict()["category"] == "numerical_mismatch"
    rec.metric("device_available", 0.0, "bool")
    assert rec.metrics["device_available"].category == "device_not_available"


def test_a_collective_timeout_is_a_communication_error() -> None:
    rec = Recorder("compatibility_check", io.StringIO())
    check = rec.outcome("collectives.all_reduce", IsolatedOutcome("timeout", message="timed out after 30 s"))
    assert check.category == "collective_comm_error"


def test_the_schemas_name_exactly_the_taxonomy() -> None:
    stage = load_schema("gatekeeper.stage/v1")["$defs"]["category"]["enum"]
    assert set(stage) == FAILURE_CATEGORIES
    known = load_schema("gatekeeper.known_issues/v1")["$defs"]["issue"]["properties"]["category"]["enum"]
    assert set(known) == set(CATEGORIES)


def test_the_diagnosis_orders_and_remedies_every_category() -> None:
    assert set(structured.ORDER) == FAILURE_CATEGORIES
    assert set(structured.REFINERS) == FAILURE_CATEGORIES
    assert set(structured.CATEGORY_STEPS) == FAILURE_CATEGORIES
    # a log signature can only refine into a category some signature has
    categories = {r.category for r in load_rules().rules}
    for allowed, _ in structured.REFINERS.values():
        assert allowed <= categories


def test_docs_list_every_category() -> None:
    text = (REPO / "docs" / "failure_analysis.md").read_text()
    table = text[text.index("## The taxonomy") :]
    listed = set(re.findall(r"^\| `(\w+)` \|", table, re.MULTILINE))
    assert listed == set(CATEGORIES)


_METRIC_NAMES = {
    "verify_hip": ["device_count", "device_available", "arch_compatible", "smoke_rel_error.matmul", "hygiene_problems",
                   "pcie_link_gen", "pcie_link_width_max"],
    "functional_test": ["op_pass_rate", "op_pass_rate.attention", "max_rel_error", "max_rel_error.bfloat16",
                        "rel_error_p99.float16", "rel_error_mean.float32", "traced_op_pass_rate", "model_grad_cosine_min",
                        "model_max_rel_error", "checkpoint_restore_rate", "sparse_pass_rate", "user_case_pass_rate",
                        "opinfo_pass_rate", "golden_cosine_min", "golden_max_rel_error", "convergence_curve_distance",
                        "convergence_spread_p", "train_interruptions", "train_interruptions[kind=oom]",
                        "memory_growth_mb_per_epoch.ci_low"],
    "performance_baseline": ["latency_ms", "latency_ms.p99", "latency_ms[batch_size=8]", "throughput", "throughput_cv",
                             "throughput_decay", "peak_memory_mb", "warmup_converged", "memory_growth_mb_per_hour.ci_low",
                             "soak_throughput", "copy_bandwidth_gbps[dir=h2d,pinned=true,size_mb=64]",
                             "tflops[dtype=float32,op=mm]", "compute_efficiency[dtype=float32,op=mm]",
                             "load_latency_ms[qps=50].p99", "load_error_rate"],
    "compatibility_check": ["onnx_export_rate", "onnx_max_abs_error", "compile_time_s", "compile_cache_hit",
                            "compile_max_abs_error", "collectives_pass_rate", "deadlocks",
                            "collective_busbw_gbps[op=all_reduce,size_mb=64]", "extension_build_ok", "sparse_pass_rate",
                            "dependency_problems", "nightly_guard_violations"],
}  # fmt: skip


@pytest.mark.parametrize("stage", list(STAGES))
def test_every_metric_the_stage_writes_is_declared(stage: str) -> None:
    _, metrics = _declared(stage)
    undeclared = [n for n in _METRIC_NAMES[stage] if find_kind(n, metrics) is None]
    assert not undeclared, f"{stage}: {undeclared}"
