"""pip provider: versions of a package from a local --find-links directory, each in a throwaway venv."""

from __future__ import annotations

import importlib.metadata
import math
import sys

import pytest

from gatekeeper import cli
from gatekeeper.bisect.providers.pip import PipProvider, linked_closure
from gatekeeper.contract.bisect_report import read_bisect
from gatekeeper.core.errors import InputError
from tests.bisect.builders import GELU_RIGHT, OPS, gelu_wheels, write_wheel

CHECK = (
    "import sys, torch, gkops; x = torch.linspace(-4, 4, 201, dtype=torch.float64); "
    "print(torch.__file__); sys.exit(0 if torch.allclose(gkops.gelu(x), torch.nn.functional.gelu(x)) else 1)"
)


@pytest.mark.slow
def test_names_the_wrong_version_and_skips_one_that_cannot_be_installed(tmp_path, monkeypatch, capsys):
    wheels = tmp_path / "wheels"
    versions = gelu_wheels(wheels, count=16, wrong_from=10)  # version 10 of 16 (1.0.9) computes GELU wrong
    # 1.0.11 needs a torch nobody has: with the job's torch pinned, pip cannot install it (and must not fetch one)
    (wheels / "gkops-1.0.11-py3-none-any.whl").unlink()
    write_wheel(wheels, "gkops", "1.0.11", {"gkops/__init__.py": OPS.format(n=11, body=GELU_RIGHT)}, ("torch>=99",))
    # ... and the index offers one: a stand-in for the CUDA torch a public index would give. It must never be taken.
    write_wheel(wheels, "torch", "99.0", {"torch/__init__.py": "raise ImportError('not the job torch')\n"})
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "bisect"
    argv = ["bisect", "--provider", "pip", "--package", "gkops", "--find-links", str(wheels)]
    argv += ["--good", versions[0], "--bad", versions[-1], "--out", str(out), "--", "python", "-c", CHECK]
    code = cli.main(argv)
    printed = capsys.readouterr().out
    assert code == 0, printed
    doc = read_bisect(out / "bisect.json")
    cands = doc["candidates"]
    assert cands[doc["result"]["first_bad"]]["ref"] == "1.0.9"
    assert cands[doc["result"]["last_good"]]["ref"] == "1.0.8"
    skipped = cands[versions.index("1.0.11")]
    assert skipped["state"] == "unavailable"
    assert "pip install gkops==1.0.11 failed" in skipped["unavailable"]
    assert "1.0.11" in printed
    assert "skipped" in printed
    measured = [c for c in cands if c["rounds"]]
    assert len(measured) <= math.ceil(math.log2(16)) + 2
    # the torch floor: every venv saw the job's torch, linked, and installed none of its own
    job_torch = importlib.metadata.version("torch")
    for c in measured:
        assert "torch" not in c["facts"]["installed"], c["facts"]
        assert c["facts"]["linked"]["torch"] == job_torch
        assert c["facts"]["installed"]["gkops"] == c["ref"]
    changes = doc["result"]["culprits"][0]["changes"]
    assert changes["installed"] == {"gkops": {"from": "1.0.8", "to": "1.0.9"}}
    script = (out / "repro" / "reproduce.sh").read_text()
    assert "gkops==1.0.9" in script
    assert f"torch=={job_torch}" in script


def test_version_range_and_options_are_checked_before_anything_runs(tmp_path):
    wheels = tmp_path / "wheels"
    gelu_wheels(wheels, count=4, wrong_from=3)
    p = PipProvider(package="gkops", find_links=str(wheels))
    p.check_tools()
    assert [c.ref for c in p.candidates("1.0.1", "1.0.3")] == ["1.0.1", "1.0.2", "1.0.3"]
    for good, bad, expect in (
        ("1.0.3", "1.0.1", "is not older than --bad"),
        ("1.0.2", "1.0.2", "the range is empty"),
        ("1.0.0", "1.0.9", "is not among the 4 versions"),
        ("one", "1.0.3", "is not a version"),
    ):
        with pytest.raises(InputError, match=expect):
            p.candidates(good, bad)
    with pytest.raises(InputError, match="exactly one of --index-url URL and --find-links DIR"):
        PipProvider(package="gkops")
    with pytest.raises(InputError, match="needs the package"):
        PipProvider(package=None, find_links=str(wheels))
    with pytest.raises(InputError, match="is not a directory"):
        PipProvider(package="gkops", find_links=str(tmp_path / "none"))
    # bisecting torch itself from PyPI would put a CUDA build of several GB in every venv
    with pytest.raises(InputError, match="CUDA builds"):
        PipProvider(package="torch", index_url="https://pypi.org/simple")
    PipProvider(package="torch", index_url="https://download.pytorch.org/whl/nightly/rocm6.2")


def test_the_job_torch_is_linked_unless_torch_is_what_is_bisected():
    closure = linked_closure(["torch"])
    assert "torch" in closure
    assert "typing-extensions" in closure  # torch's own requirements come along
    assert "torch" not in linked_closure(["torch"], exclude={"torch"})
    with_gk = linked_closure(["gatekeeper-rocm"], exclude={"torch"})
    assert "pyyaml" in with_gk
    assert "torch" not in with_gk  # bisecting torch: the candidate's torch, never the job's


def test_cli_pip_option_errors_are_one_line(tmp_path, capsys):
    code = cli.main(
        ["bisect", "--provider", "pip", "--good", "1", "--bad", "2", "--out", str(tmp_path / "o"), "--", sys.executable]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--package" in err[0]


@pytest.mark.slow
def test_a_stage_runs_on_the_python_of_a_candidate_venv(tmp_path):
    """--stage with --provider pip: gatekeeper and its requirements are linked into the venv, the stage runs there."""
    from gatekeeper.bisect.providers.base import OUT, Candidate
    from gatekeeper.contract.stage_report import read_stage
    from gatekeeper.core import proc

    wheels = tmp_path / "wheels"
    gelu_wheels(wheels, count=2, wrong_from=3)
    provider = PipProvider(package="gkops", find_links=str(wheels), with_gatekeeper=True)
    prepared = provider.prepare(Candidate(0, "1.0.1", "1.0.1"), tmp_path / "work")
    out = tmp_path / "out"
    out.mkdir()
    inv = prepared.render(
        ["-m", "gatekeeper", "stage", "verify_hip", "--device", "cpu", "--out", OUT], out, python=True
    )
    assert inv.argv[0] == str(tmp_path / "work" / "venv-0000" / "bin" / "python")
    res = proc.run(inv.argv, timeout=600, env=inv.env, cwd=inv.cwd)
    assert res.ok, res.stderr[-2000:]
    report = read_stage(out / "verify_hip.json")
    assert report.environment.torch_version == importlib.metadata.version("torch")
    provider.cleanup(prepared)
    assert not (tmp_path / "work" / "venv-0000").exists()
