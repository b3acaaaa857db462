"""The reproduction bundle calls only allow-listed torch operators with bounded tensors; anything else is a comment."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gatekeeper.analyze.bundle import repro_cases, write_bundle
from gatekeeper.analyze.diagnosis import FailedCheck
from tests.security import hostile

ATTACKS = [
    {"op": "os.system", "shapes": [], "kwargs": {"command": "touch {marker}"}},
    {"op": "torch.os.system", "shapes": [], "kwargs": {"command": "touch {marker}"}},
    {"op": "torch._C._dynamo.eval_frame", "shapes": []},
    {"op": "aten.__class__.__init__", "shapes": []},
    {"op": "torch.add", "shapes": [[1, 1]], "dtypes": ["os.system"]},
    {"op": "torch.add", "shapes": [[100000, 100000], [1]]},  # 40 GB
    {"op": "torch.add", "shapes": [[-1]]},
    {"op": "torch.add\nimport os; os.system('touch {marker}')", "shapes": [[1]]},
    {"op": "aten.add.Tensor", "shapes": [[1], [1]], "kwargs": {"alpha": {"__reduce__": "os.system"}}},
]


def _diagnosis(details: list[dict]):
    from dataclasses import replace

    checks = tuple(FailedCheck("functional_test", f"case{i}", "failed", "boom", d) for i, d in enumerate(details))
    return replace(hostile.diagnosis("x"), failed_checks=checks)


def _run(bundle):
    return subprocess.run(
        [sys.executable, "repro.py"], cwd=bundle, check=False, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_an_artifact_cannot_make_repro_py_call_anything_but_torch_operators(tmp_path):
    marker = tmp_path / "PWNED"
    attacks = [json.loads(json.dumps(a).replace("{marker}", str(marker))) for a in ATTACKS]
    good = {"op": "aten.add.Tensor", "shapes": [[2, 3], [2, 3]], "dtypes": ["float32", "float32"], "seed": 1}
    bundle = write_bundle(tmp_path / "b", _diagnosis([*attacks, good]), capture_environment=False)
    cases = json.loads((bundle / "cases.json").read_text())
    assert [c["op"] for c in cases] == ["aten.add.Tensor"]  # only the allow-listed case is a case
    script = (bundle / "repro.py").read_text()
    compile(script, "repro.py", "exec")  # a hostile op name cannot break out of its comment
    assert script.count("# not run: functional_test/case") == len(ATTACKS)
    assert "\nimport os; os.system" not in script
    run = _run(bundle)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "aten.add.Tensor max abs error" in run.stdout
    assert not marker.exists()


@pytest.mark.slow
def test_a_tampered_cases_json_is_refused_by_repro_py(tmp_path):
    marker = tmp_path / "PWNED"
    good = {"op": "aten.add.Tensor", "shapes": [[2], [2]], "dtypes": ["float32", "float32"]}
    bundle = write_bundle(tmp_path / "b", _diagnosis([good]), capture_environment=False)
    cases = json.loads((bundle / "cases.json").read_text())
    cases.append({"check": "x", "op": "torch.os.system", "shapes": [], "dtypes": [], "seed": 0,
                  "kwargs": {"command": f"touch {marker}"}})  # fmt: skip
    cases.append({"check": "y", "op": "aten.add.Tensor", "shapes": [[10**6, 10**6]], "dtypes": ["float32"], "seed": 0})
    (bundle / "cases.json").write_text(json.dumps(cases))
    run = _run(bundle)
    assert not marker.exists()
    assert run.returncode == 1
    assert "x: refused" in run.stdout
    assert "y: refused" in run.stdout


def test_repro_cases_keep_public_torch_functions_and_aten_overloads():
    checks = [
        FailedCheck(
            "s", "a", "failed", "", {"op": "torch.nn.functional.conv2d", "shapes": [[1, 1, 4, 4], [1, 1, 3, 3]]}
        ),
        FailedCheck("s", "b", "failed", "", {"op": "aten.mm.default", "shape": [2, 2], "dtype": "torch.float16"}),
        FailedCheck("s", "c", "failed", "", {"op": "torch.nn.functional.__dict__", "shapes": [[1]]}),
    ]
    assert [c["op"] for c in repro_cases(checks)] == ["torch.nn.functional.conv2d", "aten.mm.default"]
