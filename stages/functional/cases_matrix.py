"""matrix: GEMM variants (odd sizes, transposed operands, batched, broadcast, empty),
attention, and float32 linear algebra compared through reconstructions where
the factors are only defined up to sign or phase."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stages.functional.catalog import Case, randn, transposed

__all__ = ["cases"]


def cases() -> list[Case]:
    import torch
    import torch.nn.functional as F

    def c(name: str, op: str, kind: str, make: Callable, call: Callable, **kw: Any) -> Case:
        return Case(f"matrix.{name}", "matrix", op, kind, make, call, **kw)

    def mats(*shapes: tuple[int, ...]) -> Callable:
        return lambda g: tuple(randn(g, *s) for s in shapes)

    def spd(g: Any, n: int = 24) -> Any:
        # symmetric positive definite with condition number about 10: solvers stay accurate in float32
        a = randn(g, n, n)
        q, _ = torch.linalg.qr(a)
        d = torch.linspace(1.0, 10.0, n, dtype=torch.float64)
        return (q * d) @ q.T

    def well_conditioned(g: Any, n: int = 24) -> Any:
        return randn(g, n, n) / n**0.5 + 3.0 * torch.eye(n, dtype=torch.float64)

    f32 = ("float32",)  # decompositions and solvers have no half kernels on most devices
    k = "matmul"
    return [
        c("mm.odd", "aten::mm", k, mats((33, 47), (47, 29)), torch.mm),
        c("mm.transposed", "aten::mm", k, mats((40, 31), (23, 40)), torch.mm, layout=transposed),
        c("mm.empty_k", "aten::mm", k, mats((5, 0), (0, 3)), torch.mm),
        c("mm.empty_m", "aten::mm", k, mats((0, 7), (7, 3)), torch.mm),
        c("bmm", "aten::bmm", k, mats((6, 17, 33), (6, 33, 9)), torch.bmm),
        c("matmul.broadcast", "aten::matmul", k, mats((3, 1, 13, 21), (4, 21, 11)), torch.matmul),
        c("matmul.vector", "aten::mv", k, mats((37, 53), (53,)), torch.matmul),
        c("addmm", "aten::addmm", k, mats((29,), (19, 45), (45, 29)), lambda b, x, y: torch.addmm(b, x, y, beta=0.5)),
        c("baddbmm", "aten::baddbmm", k, mats((4, 9, 7), (4, 9, 15), (4, 15, 7)), torch.baddbmm),
        c("linear", "aten::linear", k, mats((8, 5, 63), (31, 63), (31,)), F.linear),
        c(
            "einsum.bij_bjk",
            "aten::bmm",
            k,
            mats((3, 10, 12), (3, 12, 8)),
            lambda a, b: torch.einsum("bij,bjk->bik", a, b),
        ),
        c("outer", "aten::outer", "pointwise", mats((17,), (23,)), torch.outer),
        c(
            "sdpa",
            "aten::scaled_dot_product_attention",
            k,
            mats((2, 4, 19, 16), (2, 4, 23, 16), (2, 4, 23, 16)),
            F.scaled_dot_product_attention,
        ),
        c(
            "sdpa.causal",
            "aten::scaled_dot_product_attention",
            k,
            mats((2, 2, 17, 8), (2, 2, 17, 8), (2, 2, 17, 8)),
            lambda q, kk, v: F.scaled_dot_product_attention(q, kk, v, is_causal=True),
        ),
        c(
            "linalg.solve",
            "aten::linalg_solve",
            "linalg",
            lambda g: (well_conditioned(g), randn(g, 24, 3)),
            torch.linalg.solve,
            dtypes=f32,
        ),
        c("linalg.inv", "aten::linalg_inv", "linalg", lambda g: (well_conditioned(g),), torch.linalg.inv, dtypes=f32),
        c("cholesky", "aten::linalg_cholesky", "linalg", lambda g: (spd(g),), torch.linalg.cholesky, dtypes=f32),
        c(
            "qr.reconstruct",
            "aten::linalg_qr",
            "linalg",
            mats((31, 17)),
            lambda a: torch.matmul(*torch.linalg.qr(a)),
            dtypes=f32,
        ),
        c(
            "svd.reconstruct",
            "aten::linalg_svd",
            "linalg",
            mats((19, 13)),
            # singular vectors are defined up to sign: compare U diag(S) Vh and S, not U and V
            lambda a: _svd_parts(torch, a),
            dtypes=f32,
        ),
        c(
            "eigh.reconstruct",
            "aten::linalg_eigh",
            "linalg",
            lambda g: (spd(g, 16),),
            lambda a: _eigh_parts(torch, a),
            dtypes=f32,
        ),
        c("det", "aten::linalg_det", "linalg", lambda g: (well_conditioned(g, 12),), torch.linalg.det, dtypes=f32),
    ]


def _svd_parts(torch: Any, a: Any) -> tuple[Any, Any]:
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    return (u * s) @ vh, s


def _eigh_parts(torch: Any, a: Any) -> tuple[Any, Any]:
    w, v = torch.linalg.eigh(a)
    return (v * w) @ v.mT, w
