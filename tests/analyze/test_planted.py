"""Planted end to end (issue 28): each failure family a model team meets first is planted for real on
this CPU (tests/support/planted.py), and ``gatekeeper analyze --artifacts`` names its category and
the failing check from the stage JSON and the verdict; the text puts both first, ahead of the log
lines; the Slack alert and the merge-request note built from analysis.json carry them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gatekeeper.contract.analysis import read_analysis
from gatekeeper.core import proc
from gatekeeper.core.errors import InputError
from gatekeeper.notify.alert import load_alert
from gatekeeper.notify.gitlab_note import note_body
from gatekeeper.notify.slack_message import build_message
from tests.support.planted import FAMILIES, Planted, gatekeeper_command, make_repo, plant


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Planted]:
    repo = make_repo(tmp_path_factory.mktemp("planted"))
    return {name: plant(name, repo) for name in FAMILIES}


def _analyze(p: Planted, fmt: str) -> str:
    repo = p.artifacts.parents[1]
    res = proc.run(
        [*gatekeeper_command(), "analyze", "--artifacts", str(p.artifacts), "--format", fmt], timeout=300, cwd=repo
    )
    assert res.returncode == 0, res.describe() + res.stderr
    return res.stdout


def _label(failing: dict) -> str:
    return f"{failing['stage']}/{failing['name']}" if failing["source"] == "check" else f"gate {failing['name']}"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_analyze_names_the_category_and_the_failing_check(planted: dict[str, Planted], name: str) -> None:
    p = planted[name]
    family = p.family
    if name == "model_not_importable":
        # the stage refuses its --model before any work: exit 2, one line, no artifact, the line in its log
        stage = p.results[0]
        assert stage.returncode == 2, stage.describe()
        assert "cannot import 'plantedmodel.models'" in stage.stderr
        assert not (p.artifacts / "functional_test.json").exists()
    else:
        last = p.results[-1]
        assert last.returncode == 1, f"{name}: the gate must block ({last.describe()}): {last.stdout[-2000:]}"
    doc = json.loads(_analyze(p, "json"))
    assert doc["category"] == family.category, (name, doc["category"], doc["explanation"])
    assert doc["decided_by"] == "artifacts", (name, doc["decided_by"])
    assert _label(doc["failing_check"]) == family.failing, (name, doc["failing_check"])
    assert doc["remediation"], name
    text = _analyze(p, "text").splitlines()
    # first: the category and the failing check; the log evidence after them
    assert text[0].startswith(f"failure analysis: {family.category} (from the artifacts: `{family.failing}`")
    assert family.failing.split("/")[-1].removeprefix("gate ") in text[1]
    if "log evidence:" in text:
        assert text.index("log evidence:") > 2


@pytest.mark.slow
def test_the_numbers_of_the_check_are_in_the_explanation(planted: dict[str, Planted]) -> None:
    kernel = json.loads(_analyze(planted["wrong_kernel"], "json"))
    assert kernel["failing_check"]["drift"]["dtype"] == "float32"
    assert kernel["failing_check"]["drift"]["shape"] == [8, 12, 16]
    assert "relative error 0.02 against the tolerance 0.0001" in kernel["explanation"]
    assert kernel["blocking_gate"]["name"] == "model-ops"
    slow = json.loads(_analyze(planted["slower_model"], "json"))
    gate = slow["failing_check"]
    assert gate["baseline_value"], gate
    assert gate["change"] > 0.15, gate
    assert "against the baseline's" in slow["explanation"]
    assert "95% interval" in slow["explanation"]
    hang = json.loads(_analyze(planted["hang"], "json"))
    assert "timed out after 5 s" in hang["explanation"]
    config = json.loads(_analyze(planted["model_not_importable"], "json"))
    assert "on the import path" in config["explanation"]
    assert "PYTHONPATH=src" in config["explanation"]


@pytest.mark.slow
def test_a_model_at_the_repository_root_imports_without_pythonpath(planted: dict[str, Planted]) -> None:
    # the console script does not put the working directory on sys.path; load_model does
    stage = planted["wrong_kernel"].results[0]
    assert stage.returncode == 1, stage.describe() + stage.stderr[-2000:]
    report = json.loads((planted["wrong_kernel"].artifacts / "functional_test.json").read_text())
    assert report["config"]["model"] == "plantedmodels.wrongkernel:build"
    assert not any(c["name"] == "stage.config" for c in report["checks"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["wrong_kernel", "device_required_on_cpu", "slower_model"])
def test_the_alert_and_the_note_carry_the_diagnosis(planted: dict[str, Planted], name: str, tmp_path: Path) -> None:
    p = planted[name]
    out = tmp_path / "analysis.json"
    repo = p.artifacts.parents[1]
    res = proc.run(
        [*gatekeeper_command(), "analyze", "--artifacts", str(p.artifacts), "--format", "json", "--out", str(out)],
        timeout=300,
        cwd=repo,
    )
    assert res.returncode == 0, res.stderr
    analysis = read_analysis(out)
    failing = p.family.failing
    assert analysis.failing.startswith(failing.replace("gate ", "gate ")), analysis.failing
    alert = load_alert(p.artifacts / "verdict.json", out, {})
    slack = json.dumps(build_message(alert, kind="started", severity="critical"))
    assert p.family.category in slack
    assert failing.split("/")[-1].removeprefix("gate ") in slack
    assert "Failing check" in slack
    note = note_body(alert)
    assert p.family.category in note
    assert "**Failing check:**" in note
    assert failing.split("/")[-1].removeprefix("gate ").replace("_", "\\_") in note or failing.split("/")[-1] in note


def test_a_model_module_in_the_working_directory_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stages.models import load_model

    pkg = tmp_path / "rootpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "models.py").write_text("import torch\n\ndef build():\n    return torch.nn.Linear(2, 2)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert load_model("rootpkg.models:build").spec == "rootpkg.models:build"
    assert sys.path[0] == str(tmp_path)


def test_a_model_that_does_not_import_names_the_path_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stages.models import load_model

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as err:
        load_model("mypkg.models:build")
    line = err.value.line()
    assert "no module named 'mypkg' on the import path" in line
    assert str(tmp_path) in line
    assert "pip install -e ." in line
    assert "PYTHONPATH=src" in line
    (tmp_path / "needsdep.py").write_text("import not_installed_anywhere_xyz\n")
    with pytest.raises(InputError, match="needs 'not_installed_anywhere_xyz', which is not installed"):
        load_model("needsdep:build")
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom at import')\n")
    with pytest.raises(InputError, match="importing 'broken' raised RuntimeError: boom at import"):
        load_model("broken:build")
