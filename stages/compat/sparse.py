"""Sparse tensors on the device: COO and CSR construction, coalesce, sparse @
dense, the to_dense round trip and sparse addition, each against dense float64
on the CPU. One worker call per case, so a kernel that crashes fails only its case."""

from __future__ import annotations

from typing import Any

__all__ = ["SPARSE_CASES", "sparse_case"]

SPARSE_CASES = ("coo_construct", "csr_construct", "coalesce", "spmm", "to_dense_roundtrip", "sparse_add")
_RTOL = 1e-5


def _random_dense(rows: int, cols: int, density: float, seed: int) -> Any:
    import torch

    gen = torch.Generator().manual_seed(seed)
    dense = torch.randn(rows, cols, generator=gen, dtype=torch.float64)
    mask = torch.rand(rows, cols, generator=gen) < density
    return dense * mask


def _close(got: Any, want: Any, what: str) -> str:
    import torch

    got = got.detach().cpu().double()
    if got.shape != want.shape:
        return f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    scale = float(want.abs().max()) or 1.0
    err = float((got - want).abs().max()) if want.numel() else 0.0
    if not torch.isfinite(got).all() or err > _RTOL * scale:
        return f"{what}: max abs error {err:.3g} (tolerance {_RTOL * scale:.3g})"
    return ""


def sparse_case(case: str, device: str) -> str:
    """Run one case on ``device`` in float32; raise AssertionError naming what differs."""
    import torch

    dense = _random_dense(64, 48, 0.1, seed=1)
    f32 = torch.float32
    if case == "coo_construct":
        idx = dense.nonzero().t()
        coo = torch.sparse_coo_tensor(
            idx, dense[idx[0], idx[1]], dense.shape, dtype=f32, device=device, check_invariants=True
        )
        assert coo.layout == torch.sparse_coo, f"layout {coo.layout}"
        assert coo.device.type == torch.device(device).type, f"built on {coo.device}, not {device}"
        problem = _close(coo.to_dense(), dense, "COO to_dense")
    elif case == "csr_construct":
        ref = dense.to_sparse_csr()
        csr = torch.sparse_csr_tensor(
            ref.crow_indices(),
            ref.col_indices(),
            ref.values(),
            dense.shape,
            dtype=f32,
            device=device,
            check_invariants=True,
        )
        assert csr.layout == torch.sparse_csr, f"layout {csr.layout}"
        problem = _close(csr.to_dense(), dense, "CSR to_dense")
    elif case == "coalesce":
        idx = torch.tensor([[0, 1, 1, 3, 0], [2, 0, 0, 1, 2]])
        vals = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
        coo = torch.sparse_coo_tensor(idx, vals, (4, 3), device=device, check_invariants=True).coalesce()
        assert coo.is_coalesced(), "coalesce() did not mark the tensor coalesced"
        assert coo._nnz() == 3, f"coalesce kept {coo._nnz()} entries, expected 3 (duplicates summed)"
        want = torch.zeros(4, 3, dtype=torch.float64)
        want[0, 2], want[1, 0], want[3, 1] = 6.0, 5.0, 4.0
        problem = _close(coo.to_dense(), want, "coalesced values")
    elif case == "spmm":
        rhs = _random_dense(48, 32, 1.0, seed=2)
        want = dense @ rhs
        coo = dense.to(f32).to(device).to_sparse()
        csr = dense.to(f32).to(device).to_sparse_csr()
        r = rhs.to(f32).to(device)
        problem = _close(torch.sparse.mm(coo, r), want, "COO @ dense") or _close(csr @ r, want, "CSR @ dense")
    elif case == "to_dense_roundtrip":
        d = dense.to(f32).to(device)
        problem = _close(d.to_sparse().to_dense(), dense, "dense→COO→dense") or _close(
            d.to_sparse_csr().to_dense(), dense, "dense→CSR→dense"
        )
    elif case == "sparse_add":
        other = _random_dense(64, 48, 0.1, seed=3)
        a = dense.to(f32).to(device).to_sparse()
        b = other.to(f32).to(device).to_sparse()
        total = (a + b).coalesce()
        assert total.is_sparse, "sparse + sparse is not sparse"
        problem = _close(total.to_dense(), dense + other, "sparse + sparse")
    else:
        raise ValueError(f"unknown sparse case {case}")
    if device != "cpu":
        torch.cuda.synchronize()
    assert not problem, f"{problem} on {device}"
    return f"matches dense float64 on CPU (device {device})"
