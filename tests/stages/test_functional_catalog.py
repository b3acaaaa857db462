from __future__ import annotations

import dataclasses

import pytest

from stages.functional import attention, catalog, runner
from stages.functional.catalog import CATEGORIES, MIN_CASES, all_cases, cases_in
from stages.functional.distributed import case_names
from stages.functional.tolerances import KINDS


def test_catalog_has_the_field_reports_case_counts():
    counts = {c: len(cases_in((c,))) for c in CATEGORIES}
    counts["distributed"] = len(case_names())
    counts["attention"] = len(attention.cases())
    for category, minimum in MIN_CASES.items():
        assert counts[category] >= minimum, (category, counts[category])
    assert sum(counts.values()) >= 147


def test_catalog_covers_the_ops_that_broke_on_mi210_and_hard_shapes():
    cases = all_cases()
    ops = {c.op for c in cases.values()}
    assert {"aten::index_put_", "aten::upsample_bilinear2d", "aten::scatter_reduce"} <= ops
    names = set(cases)
    assert {"convolution.conv2d.grouped", "convolution.conv2d.dilated", "convolution.conv2d.channels_last"} <= names
    assert {"basic_math.add.empty", "matrix.mm.empty_k", "convolution.conv2d.empty_batch"} <= names
    for case in cases.values():
        assert case.kind in KINDS
        assert case.name.startswith(case.category + ".")
        assert case.dtypes


def test_custom_backward_cases_run_gradcheck():
    cases = cases_in(("custom_backward",))
    assert all(c.gradcheck and c.forward for c in cases)


@pytest.mark.parametrize(
    "name", ["basic_math.index_put_", "convolution.upsample_bilinear2d", "reduction.scatter_reduce.sum"]
)
def test_correct_kernels_pass_in_every_dtype(name):
    result = runner.run_case(name, "cpu", ("float32", "float16", "bfloat16"), (0, 1))
    assert result["status"] == "passed", result["message"]
    assert set(result["details"]["errors"]) == {"float32", "float16", "bfloat16"}
    assert all(len(e) == 2 for e in result["details"]["errors"].values())  # one error per seed


def test_a_kernel_that_computes_in_half_precision_fails_float32(monkeypatch):
    import torch

    good = all_cases()["matrix.mm.odd"]
    # a float32 kernel that secretly runs in half (the float64 reference stays exact)
    sloppy = dataclasses.replace(
        good, call=lambda a, b: (a.half() @ b.half()).float() if a.dtype == torch.float32 else a @ b
    )
    monkeypatch.setitem(all_cases(), good.name, sloppy)
    result = runner.run_case(good.name, "cpu", ("float32",), (0,))
    assert result["status"] == "failed"
    assert "float32 seed 0: relative error" in result["message"]


def test_a_wrong_custom_backward_fails_gradcheck(monkeypatch):
    good = all_cases()["custom_backward.square"]
    wrong = dataclasses.replace(good, forward=catalog_square_wrong)
    monkeypatch.setitem(all_cases(), good.name, wrong)
    result = runner.run_case(good.name, "cpu", ("float32",), (0,))
    assert result["status"] == "failed"
    assert "gradcheck float64" in result["message"]


def catalog_square_wrong(x):
    import torch

    class BadSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return x * g  # should be 2 * x * g

    return BadSquare.apply(x)


def test_duplicate_case_names_are_refused(monkeypatch):
    monkeypatch.setattr(catalog, "_CASE_MODULES", ("cases_math", "cases_math"))
    monkeypatch.setattr(catalog, "_CASES", None)
    with pytest.raises(ValueError, match="duplicate case"):
        all_cases()
