"""The built-in operator catalog: ``Case`` and the registry of all cases by category.

A case makes its inputs in float64 on the CPU from a seeded generator, then runs
its call twice: on those inputs (the reference) and on the inputs cast to the
dtype under test and moved to the device. ``layout`` is applied to both (after
the cast) to give the op non-contiguous, transposed or channels-last tensors
without changing their values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CATEGORIES",
    "MIN_CASES",
    "Case",
    "all_cases",
    "cases_in",
    "channels_last",
    "randint",
    "randn",
    "transposed",
    "uniform",
]

# category -> the minimum number of cases the field report's table has
MIN_CASES: dict[str, int] = {
    "basic_math": 48,
    "convolution": 35,
    "reduction": 22,
    "matrix": 18,
    "custom_backward": 14,
    "distributed": 10,
    "attention": 12,  # stages.functional.attention: one SDPA backend forced per case
}
CATEGORIES = tuple(MIN_CASES)
ALL_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Case:
    name: str  # "<category>.<short name>", the check name
    category: str
    op: str  # the aten op under test, for the failing-ops table
    kind: str  # the tolerance row (stages.functional.tolerances)
    make: Callable[[Any], tuple[Any, ...]]  # generator -> float64 CPU inputs
    call: Callable[..., Any]
    dtypes: tuple[str, ...] = ALL_DTYPES
    layout: Callable[..., tuple[Any, ...]] | None = None  # inputs -> inputs with the strides under test
    gradcheck: bool = False  # custom autograd: also gradcheck/gradgradcheck in float64
    forward: Callable[..., Any] | None = None  # for gradcheck: the Function applied to make()[:-1]


# the modules that define the in-process cases, one per category
_CASE_MODULES = ("cases_math", "cases_conv", "cases_reduction", "cases_matrix", "autograd_cases")


def _registry() -> dict[str, Case]:
    import importlib

    out: dict[str, Case] = {}
    for name in _CASE_MODULES:
        module = importlib.import_module(f"stages.functional.{name}")
        for case in module.cases():
            if case.name in out:
                raise ValueError(f"duplicate case {case.name}")
            out[case.name] = case
    return out


_CASES: dict[str, Case] | None = None


def all_cases() -> dict[str, Case]:
    """Every in-process case (the distributed ones run as process pairs, see ``distributed``)."""
    global _CASES
    if _CASES is None:
        _CASES = _registry()
    return _CASES


def cases_in(categories: tuple[str, ...]) -> list[Case]:
    return [c for c in all_cases().values() if c.category in categories]


def randn(g: Any, *shape: int) -> Any:
    import torch

    return torch.randn(shape, generator=g, dtype=torch.float64)


def uniform(g: Any, shape: tuple[int, ...], lo: float, hi: float) -> Any:
    import torch

    return torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo


def randint(g: Any, high: int, *shape: int) -> Any:
    import torch

    return torch.randint(0, high, shape, generator=g)


def transposed(*xs: Any) -> tuple[Any, ...]:
    """Non-contiguous: the same values seen through swapped last two strides."""
    return tuple(x.transpose(-1, -2) for x in xs)


def channels_last(*xs: Any) -> tuple[Any, ...]:
    import torch

    return tuple(x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x for x in xs)
