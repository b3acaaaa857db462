"""compatibility_check end to end on CPU: one stage run (with a planted deadlock,
a nightly channel and onnxruntime declared downstream) shared by the tests below.

The kernel cache lives in pytest's cache directory, so the ~40 s extension build
and the ~35 s inductor compile are cold only on a fresh checkout (as in CI).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gatekeeper import cli
from gatekeeper.contract.stage_report import read_stage
from gatekeeper.kernel_cache.key import cache_env
from stages import STAGES, compatibility_check
from stages.compat.collectives import COLLECTIVES
from stages.compat.sparse import SPARSE_CASES
from stages.isolate import run_isolated
from tests.conftest import REPO

TIMEOUT = 5.0


@pytest.fixture(scope="module")
def stage_run(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    out = tmp_path_factory.mktemp("compat_artifacts")
    cache = Path(request.config.cache.mkdir("gatekeeper-kernel-cache"))
    warm = any((cache / "inductor").rglob("*.py"))  # compiled graphs from an earlier session
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GATEKEEPER_CACHE_DIR", str(cache))
        mp.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        for var in cache_env(cache):  # the defaults must come from GATEKEEPER_CACHE_DIR, not the caller's env
            mp.delenv(var, raising=False)
        code = compatibility_check.main(
            [
                "--out", str(out), "--device", "cpu", "--batch-size", "2", "--channel", "nightly",
                "--world-size", "2", "--collective-timeout", str(TIMEOUT), "--collective-max-mb", "1",
                "--plant-deadlock", "1:all_gather", "--downstream", "onnxruntime", "--check-timeout", "400",
            ]
        )  # fmt: skip
    report = read_stage(out / "compatibility_check.json")  # validates against the stage schema
    report.summary["test_cache_was_warm"] = warm
    return code, out, cache, report, {c.name: c for c in report.checks}


def test_registered_last_in_stages() -> None:
    assert list(STAGES)[-1] == "compatibility_check"
    assert STAGES["compatibility_check"] == "stages.compatibility_check"


@pytest.mark.slow
def test_artifacts_validate_and_every_check_is_a_junit_case(stage_run) -> None:
    code, out, _, report, checks = stage_run
    assert code == 1  # the planted deadlock and the nightly guard fail it
    assert report.status == "failed"
    junit = (out / "compatibility_check.junit.xml").read_text()
    for name in checks:
        assert f'name="{name}"' in junit
    assert "deadlock" in (out / "compatibility_check.log").read_text()
    expected = {
        "onnx_export_rate", "onnx_max_abs_error", "compile_time_s", "compile_cache_hit", "compile_max_abs_error",
        "collectives_pass_rate", "deadlocks", "extension_build_ok", "sparse_pass_rate", "dependency_problems",
        "nightly_guard_violations",
    }  # fmt: skip
    assert expected <= set(report.metrics)
    # the planted deadlock ends the ranks before the bandwidth part: skipped with the reason, metrics unmeasured
    assert checks["collectives.bandwidth"].status == "skipped"
    assert "not run" in checks["collectives.bandwidth"].message
    assert report.metrics["collective_busbw_gbps[op=all_reduce,size_mb=64]"].value is None
    for check in report.checks:
        if check.status == "skipped":
            assert check.message, f"{check.name} skipped without a reason"


@pytest.mark.slow
def test_onnx_exported_and_validated_in_onnxruntime(stage_run) -> None:
    _, out, _, report, checks = stage_run
    for name in ("onnx.export", "onnx.checker", "onnx.onnxruntime"):
        assert checks[name].status == "passed", checks[name].message
    assert checks["onnx.export"].details["exporter"] in ("dynamo", "torchscript")
    model_dir = out / "compatibility_check" / "onnx"
    assert (model_dir / "model.onnx").is_file()
    if checks["onnx.export"].details["exporter"] == "dynamo":
        assert (model_dir / "model.onnx.data").is_file()  # the weights live beside the graph
    assert report.metrics["onnx_export_rate"].value == 1.0
    assert report.metrics["onnx_max_abs_error"].value <= 1e-4


@pytest.mark.slow
def test_compile_matches_eager_and_a_second_run_is_warm(stage_run) -> None:
    _, _, cache, report, checks = stage_run
    assert checks["compile.inductor"].status == "passed", checks["compile.inductor"].message
    assert report.metrics["compile_time_s"].value > 0
    assert report.metrics["compile_max_abs_error"].value <= 1e-4
    if not report.summary["test_cache_was_warm"]:  # an empty cache cannot hit (a warm one may hold other graphs)
        assert report.metrics["compile_cache_hit"].value == 0.0
    assert any((cache / "inductor").rglob("*")), "inductor wrote nothing into the kernel cache"
    # A fresh process with the same cache must hit it.
    again = run_isolated(
        "stages.compat.compile_check:compile_and_compare",
        timeout=400,
        env=cache_env(cache),
        model_spec=None, seed=0, batch_size=2, input_shape=None, device="cpu", atol=1e-4,
    )  # fmt: skip
    assert again.ok, again.message
    assert again.value["details"]["cache_hit"] is True, again.value["details"]


@pytest.mark.slow
def test_planted_deadlock_is_named_detected_in_time_and_cleaned_up(stage_run) -> None:
    _, out, _, report, checks = stage_run
    assert checks["collectives.all_reduce"].status == "passed"
    dead = checks["collectives.all_gather"]
    assert dead.status == "failed"
    assert "deadlock" in dead.message
    assert "rank 1 never joined all_gather" in dead.message
    assert dead.details["missing_ranks"] == [1]
    assert f"within {TIMEOUT:g} s (detected after " in dead.message  # by the timeout, not by luck
    for later in COLLECTIVES[2:]:
        assert checks[f"collectives.{later}"].status == "skipped"
    cleanup = checks["collectives.cleanup"]
    assert cleanup.status == "passed", cleanup.message
    # never a hung job: every rank process ended, each with its exit recorded (pytest-timeout guards a real hang)
    assert len(cleanup.details["rank_exits"]) == 2
    assert report.metrics["deadlocks"].value == 1.0
    assert "--- rank 0 (rank 0: exited with code 1), last lines ---" in (out / "compatibility_check.log").read_text()
    assert report.metrics["collectives_pass_rate"].value == 0.5


@pytest.mark.slow
def test_extension_built_into_the_kernel_cache(stage_run) -> None:
    _, _, cache, report, checks = stage_run
    assert checks["extension.cpp"].status == "passed", checks["extension.cpp"].message
    assert checks["extension.gpu"].status == "skipped"
    assert "GPU" in checks["extension.gpu"].message
    assert report.metrics["extension_build_ok"].value == 1.0
    assert list((cache / "torch_extensions").rglob("gatekeeper_compat_cpp*.so"))


@pytest.mark.slow
def test_sparse_cases_pass(stage_run) -> None:
    _, _, _, report, checks = stage_run
    for case in SPARSE_CASES:
        assert checks[f"sparse.{case}"].status == "passed", checks[f"sparse.{case}"].message
    assert report.metrics["sparse_pass_rate"].value == 1.0


@pytest.mark.slow
def test_dependencies_and_nightly_guard(stage_run) -> None:
    _, _, _, report, checks = stage_run
    assert checks["dependencies.downstream.onnxruntime"].status == "passed"
    assert "torch 2." in checks["dependencies.versions"].message
    pip_problems = checks["dependencies.pip_check"].details.get("problems", [])
    assert report.metrics["dependency_problems"].value == len(pip_problems)
    guard = checks["nightly_guard.onnxruntime"]
    assert guard.status == "failed"
    assert "nightly" in guard.message
    assert "onnxruntime" in guard.message
    assert report.metrics["nightly_guard_violations"].value == 1.0


def _evaluate(artifacts: Path, gates: Path, out: Path) -> tuple[int, dict]:
    code = cli.main(
        ["evaluate", "--artifacts", str(artifacts), "--gates", str(gates), "--out", str(out), "--channel", "nightly"]
    )
    return code, {g["name"]: g for g in json.loads((out / "verdict.json").read_text())["gates"]}


@pytest.mark.slow
def test_gates_block_on_the_deadlock_and_the_nightly_guard(stage_run, tmp_path: Path) -> None:
    _, out, _, _, _ = stage_run
    code, gates = _evaluate(out, REPO / "gates.yaml", tmp_path)
    assert code == 1
    assert gates["multi-device"]["outcome"] == "fail"
    assert gates["nightly-downstream"]["outcome"] == "fail"
    for name in ("onnx-export", "onnx-accuracy", "sparse-tensors"):
        assert gates[name]["outcome"] == "pass", gates[name]


@pytest.mark.slow
def test_a_waiver_lifts_the_nightly_guard(stage_run, tmp_path: Path) -> None:
    _, out, _, _, _ = stage_run
    doc = yaml.safe_load((REPO / "gates.yaml").read_text())
    doc["waivers"] = [
        {
            "gate": "nightly-downstream",
            "reason": "ORT pinned separately",
            "owner": "ml-platform",
            "expires": "2999-12-31",
        }
    ]
    gates_path = tmp_path / "gates.yaml"
    gates_path.write_text(yaml.safe_dump(doc))
    _, gates = _evaluate(out, gates_path, tmp_path)
    assert gates["nightly-downstream"]["outcome"] != "fail"
    assert gates["nightly-downstream"]["waiver"]


@pytest.mark.parametrize(
    ("argv", "where"),
    [
        (["--plant-deadlock", "7:all_reduce"], "--plant-deadlock"),
        (["--plant-deadlock", "1:allreduce"], "--plant-deadlock"),
        (["--world-size", "1"], "--world-size"),
        (["--downstream", "onnx runtime"], "--downstream"),
        (["--collective-timeout", "0"], "--collective-timeout"),
        (["--bandwidth-sizes", "1,0.5"], "--bandwidth-sizes"),
        (["--bandwidth-iters", "0"], "--bandwidth-iters"),
        (["--model", "gatekeeper_no_such_module:build"], "--model"),
    ],
)
def test_bad_options_exit_2_with_one_line(argv, where, tmp_path: Path, capsys) -> None:
    code = cli.main(["stage", "compatibility_check", "--out", str(tmp_path), "--device", "cpu", *argv])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("gatekeeper: ")
    assert where in err[0]
    assert not (tmp_path / "compatibility_check.json").exists()
