from __future__ import annotations

import pytest

from stages.compat import sparse


@pytest.mark.parametrize("case", sparse.SPARSE_CASES)
def test_case_passes_on_cpu(case: str) -> None:
    assert "matches dense float64" in sparse.sparse_case(case, "cpu")


def test_a_wrong_result_is_an_assertion_naming_it(monkeypatch) -> None:
    import torch

    real = torch.Tensor.to_dense
    monkeypatch.setattr(torch.Tensor, "to_dense", lambda self, *a, **k: real(self, *a, **k) * 1.5)
    with pytest.raises(AssertionError, match="COO to_dense: max abs error"):
        sparse.sparse_case("coo_construct", "cpu")


def test_unknown_case() -> None:
    with pytest.raises(ValueError, match="unknown sparse case"):
        sparse.sparse_case("nope", "cpu")
