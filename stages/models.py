"""The built-in demo model, and loading a user's model from ``module:factory``.

The demo is a small ResNet-style CNN whose feature map feeds a small transformer
block: it exercises convolutions, batch norm, pooling, attention, layer norm and
GELU, like the models teams actually ship, in about a second on a CPU.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from typing import Any

from gatekeeper.core.errors import InputError

__all__ = ["DEMO_SPEC", "LoadedModel", "demo_model", "import_path", "load_model", "resolve_model"]

DEMO_SPEC = "stages.models:demo_model"


def _build_demo(num_classes: int = 10, width: int = 32, heads: int = 4) -> Any:
    import torch
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.short = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else nn.Identity()
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(y)) + self.short(x))

    class DemoNet(nn.Module):
        """ResNet-style stem and two stages, then a transformer encoder block over the 8x8 patch grid."""

        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
            self.layer1 = BasicBlock(width, width, 1)
            self.layer2 = BasicBlock(width, 2 * width, 2)
            self.pool = nn.AdaptiveAvgPool2d(8)
            self.block = nn.TransformerEncoderLayer(
                d_model=2 * width, nhead=heads, dim_feedforward=4 * width, dropout=0.0, batch_first=True
            )
            self.norm = nn.LayerNorm(2 * width)
            self.head = nn.Linear(2 * width, num_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.layer2(self.layer1(self.stem(x)))
            x = self.pool(x).flatten(2).transpose(1, 2)  # (B, 64 tokens, C)
            x = self.norm(self.block(x))
            return self.head(x.mean(dim=1))

        def example_input(self, batch_size: int = 8) -> torch.Tensor:
            return torch.randn(batch_size, 3, 32, 32)

    return DemoNet()


def demo_model() -> Any:
    return _build_demo()


@dataclass(frozen=True)
class LoadedModel:
    spec: str
    module: Any  # torch.nn.Module

    def example_input(self, batch_size: int, input_shape: tuple[int, ...] | None = None, seed: int = 0) -> Any:
        """A batch for the model: from --input-shape, else the model's own ``example_input``."""
        import torch

        torch.manual_seed(seed)
        if input_shape:
            return torch.randn(batch_size, *input_shape)
        maker = getattr(self.module, "example_input", None)
        if maker is None:
            raise InputError(
                None, "--model", f"{self.spec} has no example_input(batch_size) method", "pass --input-shape C,H,W"
            )
        return maker(batch_size)


def import_path() -> list[str]:
    """Where ``--model`` modules are found: the working directory first (as ``python -m`` does), then sys.path.

    A CI job runs in the model repository's root, so ``--model mypkg.models:build`` finds
    ``mypkg/models.py`` there without PYTHONPATH. A src/ layout (``src/mypkg/``) needs the package
    installed (``pip install -e .``) or ``PYTHONPATH=src``.
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    # PYTHONPATH as the stage's child processes will see it (it may have been set after this one started)
    for entry in reversed([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]):
        if entry not in sys.path:
            sys.path.insert(1, entry)
    return [cwd if p == "" else p for p in sys.path]


def load_model(spec: str | None = None, *, seed: int = 0) -> LoadedModel:
    """Import ``module:factory`` and call the factory (default: the demo model)."""
    import torch

    spec = spec or DEMO_SPEC
    factory = resolve_model(spec)
    torch.manual_seed(seed)
    model = factory()
    if not isinstance(model, torch.nn.Module):
        raise InputError(
            None,
            "--model",
            f"{spec} returned {type(model).__name__}, not torch.nn.Module",
            "make the factory return the torch.nn.Module to test",
        )
    return LoadedModel(spec, model)


def resolve_model(spec: str | None = None) -> Any:
    """The factory of ``module:factory``, imported but not called (a stage checks its ``--model`` this way
    before any work: building the model belongs in an isolated worker, where a crash is a failed check)."""
    spec = spec or DEMO_SPEC
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(None, "--model", f"{spec!r} is not module:factory", "e.g. --model mypkg.models:build")
    searched = import_path()
    try:
        mod = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        missing = err.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            shown = ", ".join(searched[:4]) + (f" and {len(searched) - 4} more" if len(searched) > 4 else "")
            raise InputError(
                None,
                "--model",
                f"cannot import {module_name!r}: no module named {missing!r} on the import path ({shown})",
                f"run the job in the repository that holds {missing.replace('.', '/')}/ or {missing}.py (the "
                "working directory is searched first); for a src/ layout pip install -e . or set PYTHONPATH=src",
            ) from None
        raise InputError(
            None,
            "--model",
            f"cannot import {module_name!r}: it needs {missing!r}, which is not installed ({err})",
            f"install {missing.split('.')[0]} in the job's image or its requirements",
        ) from None
    except Exception as err:  # the module's own code raised while it was imported (an ImportError included)
        first = (str(err).strip().splitlines() or [""])[0][:300]
        raise InputError(
            None,
            "--model",
            f"importing {module_name!r} raised {type(err).__name__}: {first}",
            f"fix the model module (python -c 'import {module_name}' in the repository shows the traceback)",
        ) from None
    factory = getattr(mod, attr, None)
    if not callable(factory):
        raise InputError(
            None, "--model", f"{module_name} has no callable {attr!r}", "name a function returning an nn.Module"
        )
    return factory


def parse_shape(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        shape = tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())
    except ValueError:
        raise InputError(None, "--input-shape", f"{text!r} is not a shape", "e.g. 3,224,224") from None
    if not shape or any(d <= 0 for d in shape):
        raise InputError(None, "--input-shape", f"{text!r} is not a shape", "e.g. 3,224,224")
    return shape
