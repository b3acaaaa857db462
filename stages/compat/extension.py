"""Extensions: build a small C++ operator (and, on a GPU, a HIP/CUDA kernel) with
``torch.utils.cpp_extension.load_inline`` and call it.

Runs in an isolated worker whose TORCH_EXTENSIONS_DIR lies in the kernel cache,
so the build (about 40 s and 1.5 GB cold) is reused by later runs. A compiler
crash, a linker error or an ABI mismatch becomes a failed check.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

__all__ = ["build_and_call", "toolchain_missing"]

# A real loop over raw data (not only ATen calls), so the compiler and the ABI are both exercised.
CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor axpby(torch::Tensor x, torch::Tensor y, double a, double b) {
  TORCH_CHECK(x.sizes() == y.sizes(), "x and y must have the same shape");
  auto xc = x.contiguous().to(torch::kFloat64);
  auto yc = y.contiguous().to(torch::kFloat64);
  auto out = torch::empty_like(xc);
  const double* px = xc.data_ptr<double>();
  const double* py = yc.data_ptr<double>();
  double* po = out.data_ptr<double>();
  for (int64_t i = 0; i < xc.numel(); ++i) po[i] = a * px[i] + b * py[i];
  return out;
}
"""

GPU_DECL = "torch::Tensor axpby_gpu(torch::Tensor x, torch::Tensor y, double a, double b);"
GPU_SOURCE = r"""
#include <torch/extension.h>

__global__ void axpby_kernel(const float* x, const float* y, float* out, float a, float b, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + b * y[i];
}

torch::Tensor axpby_gpu(torch::Tensor x, torch::Tensor y, double a, double b) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "inputs must be on the GPU");
  auto xc = x.contiguous().to(torch::kFloat32);
  auto yc = y.contiguous().to(torch::kFloat32);
  auto out = torch::empty_like(xc);
  int64_t n = xc.numel();
  int threads = 256;
  int blocks = (int)((n + threads - 1) / threads);
  axpby_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), yc.data_ptr<float>(), out.data_ptr<float>(),
                                    (float)a, (float)b, n);
  return out;
}
"""


def _use_pip_ninja() -> None:
    # The ninja wheel puts its binary next to the venv's python, which need not be on PATH.
    try:
        import ninja

        os.environ["PATH"] = os.pathsep.join([ninja.BIN_DIR, os.environ.get("PATH", "")])
    except ImportError:
        pass


def toolchain_missing() -> str:
    """Why no C++ extension can be built here ('' when it can)."""
    _use_pip_ninja()
    from torch.utils.cpp_extension import is_ninja_available

    if not is_ninja_available():
        return "ninja not found (pip install ninja)"
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        return f"no C++ compiler ({cxx} not on PATH)"
    return ""


def _build(name: str, **kwargs: Any) -> tuple[Any, float, bool]:
    from torch.utils.cpp_extension import _get_build_directory, load_inline

    build_dir = Path(_get_build_directory(name, verbose=False))
    warm = any(build_dir.glob("*.so"))
    t0 = time.monotonic()
    module = load_inline(name=name, verbose=False, **kwargs)
    return module, time.monotonic() - t0, warm


def build_and_call(*, gpu: bool, device: str) -> dict[str, Any]:
    """Build and call the extension(s); return {"checks": [...]} with one entry per build."""
    import torch

    missing = toolchain_missing()
    if missing:
        from stages._stage import SkipCheck

        raise SkipCheck(missing)
    checks: list[dict[str, Any]] = []
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1000, generator=gen, dtype=torch.float64)
    y = torch.randn(1000, generator=gen, dtype=torch.float64)
    want = 2.5 * x - 0.5 * y
    ext_dir = os.environ.get("TORCH_EXTENSIONS_DIR", "")

    module, secs, warm = _build("gatekeeper_compat_cpp", cpp_sources=CPP_SOURCE, functions=["axpby"])
    got = module.axpby(x, y, 2.5, -0.5)
    ok = torch.equal(got, want)
    state = "warm (cached build)" if warm else "cold build"
    msg = f"{state} in {secs:.1f} s under {ext_dir or 'the default extensions dir'}; result " + (
        "exact" if ok else f"wrong (max abs error {float((got - want).abs().max()):.3g})"
    )
    details = {"build_s": secs, "warm": warm, "extensions_dir": ext_dir}
    checks.append({"name": "extension.cpp", "status": "passed" if ok else "failed", "message": msg, "details": details})
    if not gpu:
        return {"checks": checks}

    from torch.utils.cpp_extension import CUDA_HOME, ROCM_HOME

    if torch.version.hip and not ROCM_HOME:
        checks.append({"name": "extension.gpu", "status": "skipped", "message": "no ROCm toolkit (hipcc) found"})
        return {"checks": checks}
    if not torch.version.hip and not CUDA_HOME:
        checks.append({"name": "extension.gpu", "status": "skipped", "message": "no CUDA toolkit (nvcc) found"})
        return {"checks": checks}
    module, secs, warm = _build(
        "gatekeeper_compat_gpu", cpp_sources=GPU_DECL, cuda_sources=GPU_SOURCE, functions=["axpby_gpu"]
    )
    xg, yg = x.float().to(device), y.float().to(device)
    got = module.axpby_gpu(xg, yg, 2.5, -0.5)
    torch.cuda.synchronize()
    err = float((got.cpu().double() - want).abs().max())
    ok = err <= 1e-5
    kind = "HIP" if torch.version.hip else "CUDA"
    state = "warm (cached build)" if warm else "cold build"
    msg = f"{kind} kernel: {state} in {secs:.1f} s; max abs error {err:.3g} vs float64"
    details = {"build_s": secs, "warm": warm, "max_abs_error": err}
    checks.append({"name": "extension.gpu", "status": "passed" if ok else "failed", "message": msg, "details": details})
    return {"checks": checks}
