"""Real inputs for the bisection tests: git repositories with a regression at a known commit, and wheels.

Every repository here is a real git repository made with gitpython, one commit
per step; every wheel is a real wheel (zip with METADATA, WHEEL and a RECORD of
sha256 hashes) that pip installs.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Callable
from pathlib import Path

import git

# A model whose forward is a fixed wait (standing in for a kernel: a sleep is steady on a shared CPU,
# where real compute fluctuates far more than the 20% to be found) and a small Linear layer.
SLOW_MODEL = """\
import time

import torch

WAIT_S = {wait}  # commit {n}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        time.sleep(WAIT_S)
        return self.linear(x)

    def example_input(self, batch_size=1):
        return torch.ones(batch_size, 8)


def build():
    torch.set_num_threads(1)
    return Model()
"""

# An operator implemented in the repository: GELU. Broken (the tanh form without its constants) from a commit on.
OPS = """\
import torch

# commit {n}


def gelu(x):
    {body}
"""
GELU_RIGHT = "return 0.5 * x * (1.0 + torch.erf(x / 2.0 ** 0.5))"
GELU_WRONG = "return 0.5 * x * (1.0 + torch.tanh(x))"
CHECK_OPS = '''\
"""Exit 0 when ops.gelu matches torch's GELU in float64, 1 when it does not (git bisect run style)."""
import sys

import torch

import ops

x = torch.linspace(-4, 4, 201, dtype=torch.float64)
sys.exit(0 if torch.allclose(ops.gelu(x), torch.nn.functional.gelu(x), atol=1e-9) else 1)
'''


def latency_gates(extra: str = "") -> str:
    """gates.yaml with one gate a bisection judges: the median latency within +10% of the good candidate;
    ``extra``: more keys of that gate, one per line (``"max_cv: 0.15"``)."""
    lines = "".join(f"    {line}\n" for line in extra.splitlines())
    return (
        "version: 1\ngates:\n  latency-median:\n    metric: performance_baseline.latency_ms\n"
        f'    compare: baseline\n    pass: "<= +10%"\n{lines}'
    )


def make_repo(path: Path, n: int, files: Callable[[int], dict[str, str]]) -> git.Repo:
    """A repository of ``n`` commits ("commit 1" .. "commit n"); ``files(i)`` is the tree of commit i."""
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@example.invalid")
    for i in range(1, n + 1):
        for name, text in files(i).items():
            (path / name).write_text(text, encoding="utf-8")
            repo.index.add([name])
        repo.index.commit(f"commit {i}")
    repo.create_tag("first", ref=repo.commit("HEAD~" + str(n - 1)))
    return repo


def commit_number(repo: git.Repo, sha: str) -> int:
    return int(repo.commit(sha).message.strip().split()[-1])


def slow_model_repo(path: Path, *, n: int = 40, slow_from: int = 23) -> git.Repo:
    """Commit ``slow_from`` of ``n`` makes the model 20% slower (50 ms -> 60 ms per forward: long enough that the
    scheduling delays of a loaded shared CPU stay a few percent of it)."""
    return make_repo(
        path, n, lambda i: {"slowmodel.py": SLOW_MODEL.format(wait=0.060 if i >= slow_from else 0.050, n=i)}
    )


def broken_op_repo(path: Path, *, n: int = 40, broken_from: int = 31) -> git.Repo:
    """Commit ``broken_from`` of ``n`` breaks ops.gelu numerically; check_ops.py says so by its exit code."""
    return make_repo(
        path,
        n,
        lambda i: {
            "ops.py": OPS.format(n=i, body=GELU_WRONG if i >= broken_from else GELU_RIGHT),
            "check_ops.py": CHECK_OPS,
        },
    )


def write_wheel(
    directory: Path, name: str, version: str, files: dict[str, str], requires: tuple[str, ...] = ()
) -> Path:
    """A pure-Python wheel pip installs (its RECORD carries the sha256 of every file)."""
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    content = {
        **files,
        f"{info}/METADATA": meta,
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: gatekeeper-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in content.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    content[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in content.items():
            zf.writestr(path, text)
    return wheel


def gelu_wheels(directory: Path, *, count: int = 16, wrong_from: int = 10) -> list[str]:
    """``count`` versions 1.0.0.. of ``gkops`` (requires torch); version number ``wrong_from`` (1-based) on is wrong."""
    directory.mkdir(parents=True, exist_ok=True)
    versions = []
    for k in range(count):
        version = f"1.0.{k}"
        body = GELU_WRONG if k + 1 >= wrong_from else GELU_RIGHT
        write_wheel(directory, "gkops", version, {"gkops/__init__.py": OPS.format(n=version, body=body)}, ("torch",))
        versions.append(version)
    return versions
