"""Sparse tensors on the device: COO and CSR construction, coalesce, sparse x dense
matmul and the to_dense round trip, each against dense CPU float64 math."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["SPARSE_CASES", "run_sparse_case"]

TOL = 1e-5  # float32 normwise relative error for the matmuls (dot products of length <= 64)


def _dense(g: Any, rows: int, cols: int, density: float = 0.15) -> Any:
    import torch

    x = torch.randn(rows, cols, generator=g, dtype=torch.float64)
    keep = torch.rand(rows, cols, generator=g, dtype=torch.float64) < density
    return x * keep


def _close(got: Any, want: Any, tol: float = TOL) -> str:
    from stages.functional.compare import rel_error

    err = rel_error(got, want)
    assert err <= tol, f"relative error {err:.3g} > {tol:g}"
    return f"relative error {err:.2g}"


def _coo_construct(g: Any, dev: Any) -> str:
    import torch

    d = _dense(g, 37, 23)
    idx = d.nonzero().T
    s = torch.sparse_coo_tensor(idx.to(dev), d[idx[0], idx[1]].float().to(dev), (37, 23), check_invariants=True)
    assert s.layout == torch.sparse_coo, f"layout {s.layout}"
    assert s._nnz() == idx.shape[1], f"nnz {s._nnz()} != {idx.shape[1]}"
    return _close(s.to_dense(), d, 1e-6)


def _coalesce(g: Any, dev: Any) -> str:
    import torch

    # duplicate coordinates: coalesce must sum them
    idx = torch.randint(0, 9, (2, 60), generator=g)
    val = torch.randn(60, generator=g, dtype=torch.float64)
    want = torch.zeros(9, 9, dtype=torch.float64).index_put_((idx[0], idx[1]), val, accumulate=True)
    s = torch.sparse_coo_tensor(idx.to(dev), val.float().to(dev), (9, 9), check_invariants=True).coalesce()
    assert s.is_coalesced(), "coalesce() returned an uncoalesced tensor"
    unique = int(torch.unique(idx[0] * 9 + idx[1]).numel())
    assert s._nnz() == unique, f"{s._nnz()} entries after coalesce, {unique} distinct coordinates"
    return _close(s.to_dense(), want, 1e-6)


def _csr_construct(g: Any, dev: Any) -> str:
    import torch

    d = _dense(g, 29, 31)
    s = d.float().to(dev).to_sparse_csr()
    assert s.layout == torch.sparse_csr, f"layout {s.layout}"
    crow, col, val = s.crow_indices(), s.col_indices(), s.values()
    rebuilt = torch.sparse_csr_tensor(crow, col, val, (29, 31), check_invariants=True)
    assert int(crow[-1]) == int((d != 0).sum()), "crow_indices does not count the non-zeros"
    return _close(rebuilt.to_dense(), d, 1e-6)


def _coo_mm(g: Any, dev: Any) -> str:
    import torch

    a, b = _dense(g, 41, 64), torch.randn(64, 17, generator=g, dtype=torch.float64)
    got = torch.sparse.mm(a.float().to(dev).to_sparse(), b.float().to(dev))
    return _close(got, a @ b)


def _csr_mm(g: Any, dev: Any) -> str:
    import torch

    a, b = _dense(g, 33, 48), torch.randn(48, 13, generator=g, dtype=torch.float64)
    got = a.float().to(dev).to_sparse_csr() @ b.float().to(dev)
    return _close(got, a @ b)


def _addmm(g: Any, dev: Any) -> str:
    import torch

    c = torch.randn(19, 7, generator=g, dtype=torch.float64)
    a, b = _dense(g, 19, 30), torch.randn(30, 7, generator=g, dtype=torch.float64)
    got = torch.sparse.addmm(c.float().to(dev), a.float().to(dev).to_sparse(), b.float().to(dev), beta=0.5)
    return _close(got, 0.5 * c + a @ b)


def _round_trip(g: Any, dev: Any) -> str:
    import torch

    d = _dense(g, 17, 45).float().to(dev)
    for name, s in (("coo", d.to_sparse()), ("csr", d.to_sparse_csr()), ("csc", d.to_sparse_csc())):
        assert torch.equal(s.to_dense(), d), f"{name}: to_dense() differs from the original"
    return "COO, CSR and CSC round trips exact"


def _empty(g: Any, dev: Any) -> str:
    import torch

    empty = torch.zeros(2, 0, dtype=torch.long)
    s = torch.sparse_coo_tensor(empty, torch.zeros(0), (5, 6), check_invariants=True).to(dev)
    got = torch.sparse.mm(s, torch.ones(6, 3, device=dev))
    assert got.shape == (5, 3), f"shape {tuple(got.shape)} != (5, 3)"
    assert not got.any(), "an empty sparse matrix times dense is not zero"
    return "empty sparse x dense is zero"


SPARSE_CASES: dict[str, Callable[[Any, Any], str]] = {
    "coo.construct": _coo_construct,
    "coo.coalesce": _coalesce,
    "csr.construct": _csr_construct,
    "coo.mm": _coo_mm,
    "csr.mm": _csr_mm,
    "coo.addmm": _addmm,
    "to_dense.round_trip": _round_trip,
    "coo.empty_mm": _empty,
}


def run_sparse_case(name: str, device: str, seed: int) -> str:
    """One sparse case on ``device`` (AssertionError: failed)."""
    import warnings

    import torch

    g = torch.Generator().manual_seed(seed)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*CSR tensor support is in beta.*")
        out = SPARSE_CASES[name](g, torch.device(device))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return out
