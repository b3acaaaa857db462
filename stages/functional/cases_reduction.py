"""reduction: sums, means, variances, norms, softmax, cumulative ops, normalisation
layers, sort/top-k and scatter_reduce."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stages.functional.catalog import Case, randint, randn, transposed, uniform

__all__ = ["cases"]


def cases() -> list[Case]:
    import torch
    import torch.nn.functional as F

    def c(name: str, op: str, kind: str, make: Callable, call: Callable, **kw: Any) -> Case:
        return Case(f"reduction.{name}", "reduction", op, kind, make, call, **kw)

    def one(*shape: int) -> Callable:
        return lambda g: (randn(g, *shape),)

    def positive(*shape: int) -> Callable:
        # sums of positive terms: the normwise error is not dominated by cancellation
        return lambda g: (uniform(g, shape, 0.5, 1.5),)

    def scatter(reduce: str, include_self: bool = True) -> Callable:
        def call(x: Any, idx: Any, src: Any) -> Any:
            return x.scatter_reduce(0, idx, src, reduce=reduce, include_self=include_self)

        return call

    def scatter_inputs(g: Any) -> tuple[Any, ...]:
        return (uniform(g, (10, 6), 0.5, 1.5), randint(g, 10, 37, 6), uniform(g, (37, 6), 0.5, 1.5))

    k = "reduction"
    return [
        c("sum.dim", "aten::sum", k, positive(37, 129), lambda x: x.sum(dim=1)),
        c("sum.all", "aten::sum", k, positive(301, 67), lambda x: x.sum()),
        c("sum.transposed", "aten::sum", k, positive(33, 65), lambda x: x.sum(dim=0), layout=transposed),
        c("sum.empty", "aten::sum", "exact", one(0, 5), lambda x: x.sum(dim=0)),
        c("mean.multi_dim", "aten::mean", k, positive(5, 17, 19), lambda x: x.mean(dim=(0, 2))),
        c("var", "aten::var", k, one(23, 211), lambda x: x.var(dim=1)),
        c("std.unbiased_false", "aten::std", k, one(17, 97), lambda x: x.std(dim=1, correction=0)),
        c("prod", "aten::prod", k, lambda g: (uniform(g, (13, 7), 0.9, 1.1),), lambda x: x.prod(dim=1)),
        c("amax", "aten::amax", "exact", one(19, 37), lambda x: x.amax(dim=1)),
        c("amin.transposed", "aten::amin", "exact", one(19, 37), lambda x: x.amin(dim=0), layout=transposed),
        c("max.values", "aten::max", "exact", one(7, 53), lambda x: x.max(dim=1).values),
        c("logsumexp", "aten::logsumexp", k, one(11, 77), lambda x: torch.logsumexp(x, dim=1)),
        c("softmax", "aten::_softmax", k, one(13, 65), lambda x: torch.softmax(x, dim=-1)),
        c("log_softmax", "aten::_log_softmax", k, one(13, 65), lambda x: torch.log_softmax(x, dim=-1)),
        c("norm.l2", "aten::linalg_vector_norm", k, one(9, 123), lambda x: torch.linalg.vector_norm(x, dim=1)),
        c("norm.l1", "aten::linalg_vector_norm", k, one(9, 123), lambda x: torch.linalg.vector_norm(x, ord=1, dim=1)),
        c("cumsum", "aten::cumsum", k, positive(7, 93), lambda x: torch.cumsum(x, dim=1)),
        c("cumprod", "aten::cumprod", k, lambda g: (uniform(g, (5, 17), 0.95, 1.05),), lambda x: torch.cumprod(x, 1)),
        c(
            "layer_norm",
            "aten::native_layer_norm",
            k,
            lambda g: (randn(g, 6, 7, 48), randn(g, 48), randn(g, 48)),
            lambda x, w, b: F.layer_norm(x, (48,), w, b),
        ),
        c(
            "batch_norm.train",
            "aten::native_batch_norm",
            k,
            lambda g: (randn(g, 8, 5, 6, 7), randn(g, 5), randn(g, 5)),
            lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        ),
        c(
            "group_norm",
            "aten::native_group_norm",
            k,
            lambda g: (randn(g, 3, 12, 5, 5), randn(g, 12), randn(g, 12)),
            lambda x, w, b: F.group_norm(x, 4, w, b),
        ),
        c("sort.values", "aten::sort", "exact", one(6, 41), lambda x: torch.sort(x, dim=1, descending=True).values),
        c("topk.values", "aten::topk", "exact", one(5, 67), lambda x: torch.topk(x, 7, dim=1).values),
        c("scatter_reduce.sum", "aten::scatter_reduce", k, scatter_inputs, scatter("sum")),
        c("scatter_reduce.amax", "aten::scatter_reduce", "exact", scatter_inputs, scatter("amax")),
        c("scatter_reduce.mean", "aten::scatter_reduce", k, scatter_inputs, scatter("mean", include_self=False)),
        c("scatter_reduce.prod", "aten::scatter_reduce", k, scatter_inputs, scatter("prod")),
    ]
