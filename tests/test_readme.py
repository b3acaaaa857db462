"""The README is the user's manual: it must keep up with the schema and the default gates."""

from __future__ import annotations

from gatekeeper.contract.schemas import load_schema
from gatekeeper.evaluate.gates import load_gates
from tests.conftest import REPO

README = (REPO / "README.md").read_text()


def test_starts_with_the_two_commands():
    lines = [line for line in README.splitlines() if line.strip()]
    assert lines[1] == "```sh"
    assert lines[2].startswith("make demo")
    assert lines[3].startswith("make test")
    assert lines[4] == "```"


def test_every_gate_key_is_documented():
    for key in load_schema("gatekeeper.gates/v1")["$defs"]["gate"]["properties"]:
        assert f"`{key}`" in README, key


def test_every_default_gate_is_documented():
    for gate in load_gates(REPO / "gates.yaml").gates:
        assert f"`{gate.name}`" in README, gate.name


def test_ci_run_calls_the_readme_test_command():
    assert "make test" in (REPO / ".ci" / "run").read_text()
