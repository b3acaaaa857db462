"""``--opinfo``: sweep PyTorch's own OpInfo database (forward samples) on the device
against CPU float64, as a wider coverage measure than the catalog.

Special handling so a correct stack shows no false failures:
- random ops (some are wrapped to reseed on every call and look deterministic)
  are reported as untested (skipped with the reason);
- ``empty*`` / ``new_empty*`` return uninitialised memory: shape and dtype only;
- SVD and eigen decompositions are compared through reconstructions, since
  their factors are defined up to sign or phase; other factorizations with the
  same ambiguity are skipped with the reason;
- every sample is copied (device and reference) just before its own run, since
  samples share tensors that ops mutate in place;
- non-tensor outputs are compared as values; OpInfos with no CPU kernels (GPU-only,
  jiterator) are skipped on the CPU and have no float64 reference elsewhere;
- the reference is rounded to the tested dtype before comparing, so an overflow
  to inf that the dtype cannot avoid is not counted as an error.
"""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["TOLERANCE", "list_ops", "missing_dependency", "run_opinfo"]

TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 8e-2}  # normwise, as in tolerances.py
RANDOM = (
    "rand", "bernoulli", "dropout", "normal", "uniform", "multinomial", "exponential", "geometric",
    "cauchy", "log_normal", "poisson", "lowrank", "rrelu", "fractional_max_pool",
)  # fmt: skip
UNINITIALISED = ("empty", "new_empty", "empty_like", "empty_strided", "new_empty_strided", "empty_permuted")
AMBIGUOUS = ("linalg.eigvals", "linalg.eigvalsh", "lu", "linalg.lu", "linalg.lu_factor", "linalg.lu_factor_ex",
             "geqrf", "linalg.ldl_factor", "linalg.ldl_factor_ex", "ormqr", "lu_unpack", "linalg.householder_product",
             "unique", "unique_consecutive", "nonzero_static", "argsort", "sort", "topk", "kthvalue", "mode",
             "median", "nanmedian", "msort")  # fmt: skip
RECONSTRUCT = ("svd", "linalg.svd", "linalg.eig", "linalg.eigh")
_OPS: dict[str, Any] | None = None


def missing_dependency() -> str:
    """Why the sweep cannot run here ("" when it can)."""
    if importlib.util.find_spec("expecttest") is None:
        return "the OpInfo database needs expecttest: pip install expecttest"
    return ""


def _ops() -> dict[str, Any]:
    global _OPS
    if _OPS is None:
        from torch.testing._internal.common_methods_invocations import op_db

        _OPS = {op.name + (f".{op.variant_test_name}" if op.variant_test_name else ""): op for op in op_db}
    return _OPS


def list_ops() -> list[str]:
    return list(_ops())


def _reconstruct(name: str, out: Any) -> Any:
    import torch

    if name in ("svd", "linalg.svd"):
        u, s, v = out
        vh = v.mH if name == "svd" else v  # torch.svd returns V, linalg.svd returns Vh
        k = s.shape[-1]
        return (u[..., :k] * s.unsqueeze(-2).to(u.dtype)) @ vh[..., :k, :], s
    if name == "linalg.eigh":
        w, v = out
        return (v * w.unsqueeze(-2).to(v.dtype)) @ v.mH, w
    w, v = out  # linalg.eig: A = V diag(w) V^-1, eigenvalues sorted for comparison
    return (v * w.unsqueeze(-2)) @ torch.linalg.inv(v), torch.sort(w.real, dim=-1).values


def _reference_for(dtype: Any, device: str, cpu_dtypes: Any) -> tuple[Any, str]:
    """(reference dtype, reference device) for samples in ``dtype``.

    float32 is compared with CPU float64. OpInfo samples in float16/bfloat16 include
    ill-conditioned ones (cancellation in ``cov``, overflow in ``matrix_exp``), so low
    precision is compared as PyTorch's own test suite does: the device against the CPU
    in the same dtype. On the CPU itself low precision must run without error ("none":
    no comparison), since there is no independent implementation to compare with.
    """
    import torch

    if dtype == torch.float32:
        if torch.float64 in cpu_dtypes:
            return torch.float64, "cpu"
        return (torch.float32, "cpu") if device != "cpu" else (torch.float32, "none")
    if device == "cpu" or torch.device(device).type == "cpu":
        return dtype, "none"
    return (dtype, "cpu") if dtype in cpu_dtypes else (None, "")


def _copy(sample: Any, device: str, dtype: Any) -> Any:
    import torch

    def conv(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        t = t.detach()
        if t.is_floating_point() or t.is_complex():
            target = dtype if t.is_floating_point() else (torch.complex128 if dtype == torch.float64 else t.dtype)
            return t.to(device=device, dtype=target, copy=True)
        return t.to(device=device, copy=True)

    return sample.transform(conv)


def run_opinfo(key: str, device: str, dtypes: list[str], max_samples: int = 64) -> dict[str, Any]:
    """Run one OpInfo's forward samples; ``{"status", "message"}`` (skipped statuses carry the reason)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation notes of the ops themselves, hundreds of them
        return _run(key, device, dtypes, max_samples)


def _run(key: str, device: str, dtypes: list[str], max_samples: int) -> dict[str, Any]:
    import torch

    from stages.functional.compare import flatten, rel_error

    op = _ops()[key]
    name = op.name
    if any(r in name for r in RANDOM):
        return {"status": "skipped", "message": "random op: untested (reseeded or random output cannot be compared)"}
    if name in AMBIGUOUS:
        return {"status": "skipped", "message": "output defined up to order, sign or pivoting: no reference comparison"}
    if name.startswith("as_strided"):
        return {
            "status": "skipped",
            "message": "reads its input's storage directly: a copied sample is a different input",
        }
    dev_type = torch.device(device).type
    cpu_dtypes = op.supported_dtypes("cpu")
    if not cpu_dtypes or name.startswith("jiterator"):  # jiterator OpInfos list CPU dtypes but raise on the CPU
        return {"status": "skipped", "message": "GPU-only OpInfo: no CPU float64 reference"}
    ran, worst, problems = 0, 0.0, []
    for dname in dtypes:
        dtype = getattr(torch, dname)
        if dtype not in op.supported_dtypes(dev_type):
            continue
        ref_dtype, ref_device = _reference_for(dtype, device, cpu_dtypes)
        if ref_dtype is None:
            continue
        for i, sample in enumerate(op.sample_inputs(device, dtype, requires_grad=False)):
            if i >= max_samples:
                break
            ref_s, dev_s = _copy(sample, "cpu", ref_dtype), _copy(sample, device, dtype)
            try:
                ref = op(ref_s.input, *ref_s.args, **ref_s.kwargs) if ref_device != "none" else None
            except Exception:  # noqa: S112 - the reference dtype cannot run this sample: nothing to compare against  # nosec B112
                continue
            try:
                got = op(dev_s.input, *dev_s.args, **dev_s.kwargs)
            except Exception as exc:
                problems.append(f"{dname} sample {i}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                break
            ran += 1
            if ref_device == "none":
                continue  # low precision on the CPU itself: it must run; there is no fair reference
            if name in UNINITIALISED or name.startswith("new_empty"):
                shapes = [(tuple(t.shape), t.dtype) for t in flatten(got) if isinstance(t, torch.Tensor)]
                want = [
                    (tuple(t.shape), dtype if t.is_floating_point() else t.dtype)
                    for t in flatten(ref)
                    if isinstance(t, torch.Tensor)
                ]
                if len(shapes) != len(want) or [s for s, _ in shapes] != [s for s, _ in want]:
                    problems.append(f"{dname} sample {i}: shape/dtype {shapes} != {want}")
                continue
            if name in RECONSTRUCT:
                got, ref = _reconstruct(name, got), _reconstruct(name, ref)
            if isinstance(ref, torch.Tensor) and ref.is_floating_point() and isinstance(got, torch.Tensor):
                ref = ref.to(got.dtype).to(ref.dtype) if got.is_floating_point() else ref
            try:
                err = rel_error(got, ref)
            except AssertionError as exc:
                problems.append(f"{dname} sample {i}: {exc}")
                break
            worst = max(worst, err)
            if not err <= TOLERANCE[dname]:
                problems.append(f"{dname} sample {i}: relative error {err:.3g} > {TOLERANCE[dname]:g}")
                break
    if problems:
        return {"status": "failed", "message": "; ".join(problems), "samples": ran}
    if ran == 0:
        return {"status": "skipped", "message": f"no sample runs on {device} in {', '.join(dtypes)}"}
    return {"status": "passed", "message": f"{ran} samples, max relative error {worst:.2g}", "samples": ran}
