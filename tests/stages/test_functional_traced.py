from __future__ import annotations

import pytest
import torch

from stages.functional import model_compare, traced

TINY = "tests.support.functional_models:tiny"


def test_snapshot_rebuilds_strides_including_expanded_and_offset_views():
    base = torch.arange(12.0).reshape(3, 4)
    for view in (base.t(), base[:, 1::2], torch.tensor([1.0, 2.0]).expand(3, 2), base[1:, 2:]):
        snap = traced._snap(view)
        rebuilt = snap.build(torch.float64, "cpu")
        assert rebuilt.stride() == view.stride()
        assert rebuilt.dtype == torch.float64
        assert torch.equal(rebuilt, view.double())


def test_capture_records_forward_and_backward_ops_with_signatures():
    ops = traced.op_list(TINY, 2, None, 0)
    assert "aten::convolution" in ops
    assert "aten::convolution_backward" in ops
    assert "aten::native_batch_norm" in ops  # train mode: batch statistics, not the eval fast path
    assert all(n >= 1 for n in ops.values())


def test_every_op_of_a_correct_model_replays_within_tolerance():
    for name in traced.op_list(TINY, 2, None, 0):
        result = traced.replay_op(TINY, 2, None, 0, name, "cpu")
        assert result["status"] in ("passed", "skipped"), (name, result["message"])


def test_drift_on_the_device_side_is_reported(monkeypatch):
    real = traced._build

    def perturbed(x, dtype, device):
        out = real(x, dtype, device)
        if dtype is None and isinstance(out, torch.Tensor) and out.is_floating_point():
            return out * 1.01  # a device kernel 1% off
        return out

    monkeypatch.setattr(traced, "_build", perturbed)
    result = traced.replay_op(TINY, 2, None, 0, "aten::convolution", "cpu")
    assert result["status"] == "failed"
    assert "drift" in result["message"]


def test_whole_model_gradients_match_cpu_float64():
    m = model_compare.model_vs_cpu(TINY, 2, None, 0, "cpu")
    assert m["grad_cosine_min"] > 0.9999
    assert m["max_rel_error"] < 1e-4
    assert {"grad conv.weight", "grad bn.weight", "grad fc.bias", "output[0]"} <= set(m["rows"])
    # conv bias before batch norm: its gradient is mathematically zero, so no cosine is claimed for it
    assert m["zero_gradients"] == ["grad conv.bias"]


def test_random_ops_are_untested_not_passed(monkeypatch):
    entries = {"aten::native_dropout": [("sig", None, ((), {}))]}
    monkeypatch.setattr(traced, "capture", lambda *a: entries)
    result = traced.replay_op(TINY, 2, None, 0, "aten::native_dropout", "cpu")
    assert result["status"] == "skipped"
    assert "random op" in result["message"]


@pytest.mark.parametrize("name", ["aten::_scaled_dot_product_flash_attention_for_cpu"])
def test_cpu_specific_kernels_are_skipped_on_a_gpu(monkeypatch, name):
    monkeypatch.setattr(traced, "capture", lambda *a: {name: [("sig", None, ((), {}))]})
    result = traced.replay_op(TINY, 2, None, 0, name, "cuda:0")
    assert result["status"] == "skipped"


def test_a_missing_device_kernel_is_reported_as_missing(monkeypatch):
    def index_put_(x, *rest):
        if x.dtype == torch.float32:  # the device replay (recorded dtype); the float64 reference works
            raise NotImplementedError("Could not run 'aten::index_put_' with arguments from the 'CUDA' backend")
        return x

    snap = traced._snap(torch.ones(3))
    monkeypatch.setattr(traced, "capture", lambda *a: {"aten::index_put_": [("sig", index_put_, ((snap,), {}))]})
    result = traced.replay_op(TINY, 2, None, 0, "aten::index_put_", "cpu")
    assert result["status"] == "failed"
    assert "missing: sig: Could not run 'aten::index_put_'" in result["message"]
