"""custom_backward: hand-written ``torch.autograd.Function``s, the kind teams ship in
their custom layers. Each case compares forward and input gradients with a CPU
float64 run (per dtype and seed) and runs gradcheck and gradgradcheck in float64.

Every backward is written with differentiable torch ops, so double backward
(gradgradcheck) goes through the same code a second-order optimiser would use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stages.functional.catalog import Case, randn, uniform

__all__ = ["cases", "functions"]

_FUNCTIONS: dict[str, Any] | None = None


def functions() -> dict[str, Any]:
    """name -> (autograd.Function subclass); built once, on first use (needs torch)."""
    global _FUNCTIONS
    if _FUNCTIONS is None:
        _FUNCTIONS = _build()
    return _FUNCTIONS


def _build() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch.autograd import Function

    class Square(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return 2 * x * g

    class Exp(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            y = torch.exp(x)
            ctx.save_for_backward(x)
            return y

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * torch.exp(x)

    class Sigmoid(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return torch.sigmoid(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            s = torch.sigmoid(x)
            return g * s * (1 - s)

    class Tanh(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return torch.tanh(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * (1 - torch.tanh(x) ** 2)

    class Softplus(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return F.softplus(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * torch.sigmoid(x)

    class Swish(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * torch.sigmoid(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            s = torch.sigmoid(x)
            return g * (s + x * s * (1 - s))

    class GeluTanh(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            inner = 0.7978845608028654 * (x + 0.044715 * x**3)
            t = torch.tanh(inner)
            d_inner = 0.7978845608028654 * (1 + 3 * 0.044715 * x**2)
            return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner)

    class Mish(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * torch.tanh(F.softplus(x))

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            t = torch.tanh(F.softplus(x))
            return g * (t + x * (1 - t * t) * torch.sigmoid(x))

    class MulAdd(Function):
        @staticmethod
        def forward(ctx: Any, x: Any, y: Any, z: Any) -> Any:
            ctx.save_for_backward(x, y)
            return x * y + z

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            x, y = ctx.saved_tensors
            return g * y, g * x, g

    class Linear(Function):
        @staticmethod
        def forward(ctx: Any, x: Any, w: Any, b: Any) -> Any:
            ctx.save_for_backward(x, w)
            return x @ w.T + b

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            x, w = ctx.saved_tensors
            return g @ w, g.T @ x, g.sum(0)

    class Normalize(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x / x.norm(dim=-1, keepdim=True)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            # the norm is recomputed from x, not saved: a saved norm would be a constant to double backward
            (x,) = ctx.saved_tensors
            n = x.norm(dim=-1, keepdim=True)
            y = x / n
            return (g - y * (g * y).sum(-1, keepdim=True)) / n

    class Softmax(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            y = torch.softmax(x, dim=-1)
            ctx.save_for_backward(x)
            return y

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            y = torch.softmax(x, dim=-1)
            return y * (g - (g * y).sum(-1, keepdim=True))

    class LogSumExp(Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return torch.logsumexp(x, dim=-1)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g.unsqueeze(-1) * torch.softmax(x, dim=-1)

    class Conv1d(Function):
        @staticmethod
        def forward(ctx: Any, x: Any, w: Any) -> Any:
            ctx.save_for_backward(x, w)
            return F.conv1d(x, w, padding=1)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            x, w = ctx.saved_tensors
            gx = F.conv_transpose1d(g, w, padding=1)
            gw = F.conv1d(x.transpose(0, 1), g.transpose(0, 1), padding=1).transpose(0, 1)
            return gx, gw

    return {
        "square": Square,
        "exp": Exp,
        "sigmoid": Sigmoid,
        "tanh": Tanh,
        "softplus": Softplus,
        "swish": Swish,
        "gelu_tanh": GeluTanh,
        "mish": Mish,
        "muladd": MulAdd,
        "linear": Linear,
        "normalize": Normalize,
        "softmax": Softmax,
        "logsumexp": LogSumExp,
        "conv1d": Conv1d,
    }


def _apply(name: str) -> Callable[..., Any]:
    def forward(*inputs: Any) -> Any:
        return functions()[name].apply(*inputs)

    return forward


def _forward_backward(name: str) -> Callable[..., Any]:
    """call(*inputs, upstream_grad) -> (output, grad of each floating input)."""

    def call(*args: Any) -> tuple[Any, ...]:
        import torch

        *inputs, gy = args
        leaves = [x.detach().requires_grad_(True) for x in inputs]
        y = functions()[name].apply(*leaves)
        grads = torch.autograd.grad(y, leaves, gy)
        return (y.detach(), *grads)

    return call


def cases() -> list[Case]:
    # (name, inputs maker); the last input is the upstream gradient, shaped like the output
    def unary(shape: tuple[int, ...] = (7, 9), lo: float = -2.0, hi: float = 2.0) -> Callable:
        return lambda g: (uniform(g, shape, lo, hi), randn(g, *shape))

    specs: list[tuple[str, str, Callable]] = [
        ("square", "aten::mul", unary()),
        ("exp", "aten::exp", unary()),
        ("sigmoid", "aten::sigmoid", unary()),
        ("tanh", "aten::tanh", unary()),
        ("softplus", "aten::softplus", unary()),
        ("swish", "aten::silu", unary()),
        ("gelu_tanh", "aten::tanh", unary()),
        ("mish", "aten::softplus", unary()),
        ("muladd", "aten::mul", lambda g: (randn(g, 5, 6), randn(g, 5, 6), randn(g, 5, 6), randn(g, 5, 6))),
        ("linear", "aten::mm", lambda g: (randn(g, 6, 11), randn(g, 5, 11), randn(g, 5), randn(g, 6, 5))),
        ("normalize", "aten::linalg_vector_norm", lambda g: (uniform(g, (4, 9), 0.5, 1.5), randn(g, 4, 9))),
        ("softmax", "aten::_softmax", unary((5, 8))),
        ("logsumexp", "aten::logsumexp", lambda g: (randn(g, 6, 10), randn(g, 6))),
        ("conv1d", "aten::convolution", lambda g: (randn(g, 2, 3, 11), randn(g, 4, 3, 3), randn(g, 2, 4, 11))),
    ]
    return [
        Case(
            f"custom_backward.{name}",
            "custom_backward",
            op,
            "autograd",
            make,
            _forward_backward(name),
            gradcheck=True,
            forward=_apply(name),
        )
        for name, op, make in specs
    ]
