from __future__ import annotations

import pytest

from stages.functional import opinfo_sweep
from stages.functional.sparse import SPARSE_CASES, run_sparse_case


@pytest.mark.parametrize("name", list(SPARSE_CASES))
def test_sparse_cases_pass_on_cpu(name):
    assert run_sparse_case(name, "cpu", 0)


@pytest.mark.slow
def test_opinfo_special_cases_are_handled_without_false_failures():
    assert opinfo_sweep.missing_dependency() == ""  # expecttest is in the dev extra
    keys = set(opinfo_sweep.list_ops())
    assert len(keys) > 600
    assert opinfo_sweep.run_opinfo("add", "cpu", ["float32"])["status"] == "passed"
    # random ops (some reseed on every call) are untested, not passed
    assert opinfo_sweep.run_opinfo("normal", "cpu", ["float32"])["status"] == "skipped"
    assert opinfo_sweep.run_opinfo("bernoulli", "cpu", ["float32"])["status"] == "skipped"
    # sign/phase-ambiguous factors: compared through reconstructions
    assert opinfo_sweep.run_opinfo("linalg.svd", "cpu", ["float32"])["status"] == "passed"
    assert opinfo_sweep.run_opinfo("linalg.eigh", "cpu", ["float32"])["status"] == "passed"
    # uninitialised memory: shape and dtype only
    assert opinfo_sweep.run_opinfo("empty_like", "cpu", ["float32"])["status"] == "passed"
    # in-place op whose samples share tensors: each sample is copied before its run
    assert opinfo_sweep.run_opinfo("nn.functional.batch_norm", "cpu", ["float32"])["status"] == "passed"
    # non-tensor output
    assert opinfo_sweep.run_opinfo("equal", "cpu", ["float32"])["status"] == "passed"
    gpu_only = [k for k in keys if k.startswith("torch.ops.aten._flash_attention_forward")]
    assert opinfo_sweep.run_opinfo(gpu_only[0], "cpu", ["float32"])["status"] == "skipped"


def test_opinfo_without_expecttest_names_the_fix(monkeypatch):
    monkeypatch.setattr(opinfo_sweep.importlib.util, "find_spec", lambda name: None)
    assert "pip install expecttest" in opinfo_sweep.missing_dependency()
