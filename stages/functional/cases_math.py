"""basic_math: pointwise arithmetic, activations, transcendental functions, indexing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stages.functional.catalog import Case, randint, randn, transposed, uniform

__all__ = ["cases"]


def _strided(*xs: Any) -> tuple[Any, ...]:
    # every other column: non-contiguous views with a stride of 2
    return tuple(x[..., ::2] for x in xs)


def cases() -> list[Case]:
    import torch
    import torch.nn.functional as F

    def c(name: str, op: str, kind: str, make: Callable, call: Callable, **kw: Any) -> Case:
        return Case(f"basic_math.{name}", "basic_math", op, kind, make, call, **kw)

    def two(shape: tuple[int, ...] = (37, 29)) -> Callable:
        return lambda g: (randn(g, *shape), randn(g, *shape))

    def one(shape: tuple[int, ...] = (41, 23), lo: float | None = None, hi: float | None = None) -> Callable:
        if lo is None or hi is None:
            return lambda g: (randn(g, *shape),)
        return lambda g: (uniform(g, shape, lo, hi),)

    def nonzero(g: Any, shape: tuple[int, ...]) -> Any:
        # magnitudes in [0.5, 2] with random signs: divisors far from zero
        mag = uniform(g, shape, 0.5, 2.0)
        return torch.where(randn(g, *shape) < 0, -mag, mag)

    def put(x: Any, idx: Any, v: Any) -> Any:
        return x.clone().index_put_((idx,), v)

    def put_acc(x: Any, idx: Any, v: Any) -> Any:
        return x.clone().index_put_((idx,), v, accumulate=True)

    def put_2d(x: Any, i: Any, j: Any, v: Any) -> Any:
        return x.clone().index_put_((i, j), v)

    return [
        c("add.broadcast", "aten::add", "pointwise", lambda g: (randn(g, 7, 1, 5), randn(g, 1, 3, 5)), torch.add),
        c("add.strided", "aten::add", "pointwise", two((33, 58)), torch.add, layout=_strided),
        c("add.empty", "aten::add", "pointwise", two((0, 5)), torch.add),
        c("sub.alpha", "aten::sub", "pointwise", two(), lambda a, b: torch.sub(a, b, alpha=0.5)),
        c("mul.transposed", "aten::mul", "pointwise", two(), torch.mul, layout=transposed),
        c("mul.scalar", "aten::mul", "pointwise", one(), lambda a: a * 1.5),
        c("div", "aten::div", "pointwise", lambda g: (randn(g, 37, 29), nonzero(g, (37, 29))), torch.div),
        c(
            "addcmul",
            "aten::addcmul",
            "pointwise",
            lambda g: (randn(g, 19, 31), randn(g, 19, 31), randn(g, 19, 31)),
            lambda a, b, d: torch.addcmul(a, b, d, value=0.5),
        ),
        c(
            "addcdiv",
            "aten::addcdiv",
            "pointwise",
            lambda g: (randn(g, 19, 31), randn(g, 19, 31), nonzero(g, (19, 31))),
            lambda a, b, d: torch.addcdiv(a, b, d, value=0.5),
        ),
        c("neg", "aten::neg", "exact", one(), torch.neg),
        c("abs.transposed", "aten::abs", "exact", one(), torch.abs, layout=transposed),
        c("sign", "aten::sign", "exact", one(), torch.sign),
        c("square", "aten::pow", "pointwise", one(), torch.square),
        c("reciprocal", "aten::reciprocal", "pointwise", lambda g: (nonzero(g, (41, 23)),), torch.reciprocal),
        c("relu", "aten::relu", "exact", one(), torch.relu),
        c("leaky_relu", "aten::leaky_relu", "pointwise", one(), lambda x: F.leaky_relu(x, 0.1)),
        c("elu", "aten::elu", "transcendental", one(), F.elu),
        c("gelu", "aten::gelu", "transcendental", one(), F.gelu),
        c("gelu.tanh", "aten::gelu", "transcendental", one(), lambda x: F.gelu(x, approximate="tanh")),
        c("silu", "aten::silu", "transcendental", one(), F.silu),
        c("mish", "aten::mish", "transcendental", one(), F.mish),
        c("hardswish", "aten::hardswish", "pointwise", one(), F.hardswish),
        c("softplus", "aten::softplus", "transcendental", one(), F.softplus),
        c("sigmoid", "aten::sigmoid", "transcendental", one(), torch.sigmoid),
        c("tanh.strided", "aten::tanh", "transcendental", one((23, 66)), torch.tanh, layout=_strided),
        c("exp", "aten::exp", "transcendental", one(lo=-3.0, hi=3.0), torch.exp),
        c("expm1", "aten::expm1", "transcendental", one(lo=-2.0, hi=2.0), torch.expm1),
        c("log", "aten::log", "transcendental", one(lo=0.1, hi=10.0), torch.log),
        c("log1p", "aten::log1p", "transcendental", one(lo=0.0, hi=5.0), torch.log1p),
        c("sqrt", "aten::sqrt", "pointwise", one(lo=0.1, hi=10.0), torch.sqrt),
        c("rsqrt", "aten::rsqrt", "pointwise", one(lo=0.1, hi=10.0), torch.rsqrt),
        c("pow.scalar", "aten::pow", "transcendental", one(lo=-2.0, hi=2.0), lambda x: torch.pow(x, 3)),
        c(
            "pow.tensor",
            "aten::pow",
            "transcendental",
            lambda g: (uniform(g, (29, 17), 0.5, 2.0), uniform(g, (29, 17), -2.0, 2.0)),
            torch.pow,
        ),
        c("sin", "aten::sin", "transcendental", one(lo=-3.0, hi=3.0), torch.sin),
        c("cos", "aten::cos", "transcendental", one(lo=-3.0, hi=3.0), torch.cos),
        c("erf", "aten::erf", "transcendental", one(), torch.erf),
        c("atan2", "aten::atan2", "transcendental", lambda g: (randn(g, 27, 13), nonzero(g, (27, 13))), torch.atan2),
        c("hypot", "aten::hypot", "pointwise", two(), torch.hypot),
        c("clamp", "aten::clamp", "exact", one(), lambda x: torch.clamp(x, -0.5, 0.75)),
        c("where", "aten::where", "exact", two(), lambda a, b: torch.where(a > 0, a, b)),
        c("maximum", "aten::maximum", "exact", two(), torch.maximum),
        c("minimum.broadcast", "aten::minimum", "exact", lambda g: (randn(g, 9, 1), randn(g, 1, 11)), torch.minimum),
        c(
            "lerp",
            "aten::lerp",
            "pointwise",
            lambda g: (randn(g, 31, 7), randn(g, 31, 7), uniform(g, (31, 7), 0.0, 1.0)),
            torch.lerp,
        ),
        c("masked_fill", "aten::masked_fill", "exact", one(), lambda x: x.masked_fill(x < 0, 2.0)),
        c(
            "index_put_",
            "aten::index_put_",
            "exact",
            lambda g: (randn(g, 50, 7), torch.randperm(50, generator=g)[:13], randn(g, 13, 7)),
            put,
        ),
        c(
            "index_put_.accumulate",
            "aten::index_put_",
            "pointwise",
            lambda g: (randn(g, 20, 7), randint(g, 20, 45), randn(g, 45, 7)),
            put_acc,
        ),
        c(
            "index_put_.2d",
            "aten::index_put_",
            "exact",
            lambda g: (randn(g, 16, 16), randint(g, 16, 9), randint(g, 16, 9), randn(g, 9)),
            lambda x, i, j, v: put_2d(x, i, j, v[0].expand(9)),  # one value: duplicates cannot race
        ),
        c(
            "index_select",
            "aten::index_select",
            "exact",
            lambda g: (randn(g, 33, 21), randint(g, 33, 40)),
            lambda x, i: torch.index_select(x, 0, i),
        ),
        c(
            "gather",
            "aten::gather",
            "exact",
            lambda g: (randn(g, 17, 23), randint(g, 23, 17, 11)),
            lambda x, i: torch.gather(x, 1, i),
        ),
        c(
            "cat.transposed",
            "aten::cat",
            "exact",
            lambda g: (randn(g, 13, 9), randn(g, 13, 4)),
            lambda a, b: torch.cat([a, b], dim=0),
            layout=transposed,
        ),
        c("flip", "aten::flip", "exact", one((5, 7, 9)), lambda x: torch.flip(x, (0, 2))),
        c(
            "copy_.channels_last",
            "aten::copy_",
            "exact",
            one((2, 3, 5, 7)),
            lambda x: x.to(memory_format=torch.channels_last),
        ),
    ]
