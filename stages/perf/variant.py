"""In the timing child: the model and input of one sweep point (dtype, resolution).

``apply`` raises ``Unsupported`` with the reason when this device cannot run the
point (bfloat16 on a GPU without it, int8 without a quantized engine or without a
Linear layer to quantize); the parent records the point as skipped with that reason.
Anything else that goes wrong is an error of the point, never a skip.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FLOAT_DTYPES", "Unsupported", "apply"]

FLOAT_DTYPES = ("float32", "float16", "bfloat16")


class Unsupported(Exception):
    """This device cannot run the point; the message says why."""


def apply(module: Any, x: Any, cfg: dict[str, Any], torch: Any) -> tuple[Any, Any]:
    """(module, input) for the point in ``cfg``: ``resolution`` first, then ``dtype``."""
    resolution = cfg.get("resolution")
    if resolution:
        if x.dim() < 4:
            raise ValueError(
                f"input_shape={resolution} sets the height and width of an image batch (N, C, H, W), "
                f"but the model's input has shape {tuple(x.shape)}; sweep full shapes instead (e.g. 3x64x64)"
            )
        torch.manual_seed(int(cfg.get("seed", 0)))
        x = torch.randn(*x.shape[:-2], int(resolution), int(resolution), dtype=x.dtype, device=x.device)
    dtype = cfg.get("dtype") or "float32"
    if dtype in FLOAT_DTYPES:
        if dtype == "bfloat16" and x.device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise Unsupported(f"bfloat16: {torch.cuda.get_device_name()} does not support it")
        wanted = getattr(torch, dtype)
        module = module.to(wanted)
        return module, (x.to(wanted) if x.is_floating_point() else x)
    if dtype == "int8":
        return _dynamic_int8(module, torch), x
    raise ValueError(f"unknown dtype {dtype!r}")


def _dynamic_int8(module: Any, torch: Any) -> Any:
    """Linear layers with int8 weights and dynamically quantized activations (the rest stays float32)."""
    import warnings

    engines = [e for e in torch.backends.quantized.supported_engines if e != "none"]
    if not engines:
        raise Unsupported("int8: this torch build has no quantized engine (torch.backends.quantized)")
    if not any(isinstance(m, torch.nn.Linear) for m in module.modules()):
        raise Unsupported("int8: the model has no nn.Linear layer for dynamic quantization to act on")
    # The transformer fast path reads .weight of its Linear layers as tensors; quantized
    # layers have none (AttributeError), and the fused kernel would bypass them anyway.
    torch.backends.mha.set_fastpath_enabled(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.ao.quantization moves to torchao
        warnings.simplefilter("ignore", UserWarning)
        return torch.ao.quantization.quantize_dynamic(module, {torch.nn.Linear}, dtype=torch.qint8)
