"""git provider, end to end on real repositories: the stage and the judge find a 20% slowdown (the command of
docs/release.md), an interrupted bisection resumes without measuring again, bad input. The broken operator found by
a command's exit code is tests/bisect/test_docs_bisect.py."""

from __future__ import annotations

import json
import math
import sys

import pytest

from gatekeeper import cli
from gatekeeper.contract.bisect_report import read_bisect, write_bisect
from tests.bisect.builders import commit_number, latency_gates, make_repo, slow_model_repo
from tests.bisect.docs import documented
from tests.security.matrix import markdown_problems

# A bisection looking for a 20% step judges at half the step: "good" is then "within 10% of the good
# candidate", which three processes show on a shared CPU, where the shipped +3% would need many more.
# max_cv 0.15: the model waits (sleeps) per forward, and on a shared 2-core CPU scheduling delays shift whole
# processes by a few percent (a CV of 6.3% over three process medians was seen under load, with a +23% step's
# always-valid CI at [+14.2%, +33.0%]); this test is about bisecting, the noise guard has its own tests
# (tests/evaluate/test_judge_max_cv.py, tests/bisect/test_noise.py).
GATES = latency_gates("max_cv: 0.15")


def _bound(n: int) -> int:
    return math.ceil(math.log2(n)) + 2


@pytest.mark.slow
def test_stage_and_judge_name_the_commit_that_made_the_model_20_percent_slower(tmp_path, monkeypatch, capsys):
    repo = slow_model_repo(tmp_path / "model", n=40, slow_from=23)
    monkeypatch.chdir(tmp_path / "model")
    (tmp_path / "model" / "gates.yaml").write_text(GATES, encoding="utf-8")
    out = tmp_path / "model" / "bisect"
    (argv,) = documented("bisect-stage")  # the command of docs/release.md, as it is written there
    assert argv[argv.index("--out") + 1] == "bisect"
    code = cli.main(argv)
    printed = capsys.readouterr().out
    assert code == 0, printed
    doc = read_bisect(out / "bisect.json")
    cands = doc["candidates"]
    result = doc["result"]
    assert commit_number(repo, cands[result["first_bad"]]["ref"]) == 23
    assert commit_number(repo, cands[result["last_good"]]["ref"]) == 22
    assert len(result["culprits"]) == 1
    assert result["culprits"][0]["exact"]
    assert doc["summary"]["run"] <= _bound(40)
    assert f"{doc['summary']['run']} of 40 candidates run" in printed
    first_bad = cands[result["first_bad"]]
    assert first_bad["decisions"][-1]["decision"] == "bad"
    assert "latency-median" in first_bad["decisions"][-1]["reason"]
    # every candidate measured is judged right: the slow ones bad, the others good
    for c in cands:
        if c["decisions"]:
            slow = commit_number(repo, c["ref"]) >= 23
            assert c["decisions"][-1]["decision"] == ("bad" if slow else "good"), c["decisions"][-1]
    assert result["signature"]["metric"] == "performance_baseline.latency_ms"
    assert result["signature"]["fingerprint"] == "cpu/cpu"
    changes = result["culprits"][0]["changes"]
    assert [c["subject"] for c in changes["commits"]] == ["commit 23"]
    bundle = out / result["repro_bundle"]
    script = (bundle / "reproduce.sh").read_text()
    assert first_bad["ref"] in script
    assert "gatekeeper stage performance_baseline" in script
    assert (bundle / "first-bad" / "performance_baseline.json").exists()
    assert (bundle / "last-good" / "performance_baseline.json").exists()
    assert json.loads((bundle / "what-changed.json").read_text())["commits"][0]["subject"] == "commit 23"
    assert repo.git.worktree("list").count("\n") == 0  # every temporary worktree is gone


CHECK = """\
import os, sys
n = int(open("n.txt").read())
if os.environ.get("GK_ABORT_AT") == str(n):
    sys.exit(200)
sys.exit(1 if n >= {bad_from} else 0)
"""


def test_an_interrupted_bisection_keeps_its_measurements_and_resumes(tmp_path, monkeypatch, capsys):
    repo = make_repo(tmp_path / "r", 12, lambda i: {"n.txt": str(i), "check.py": CHECK.format(bad_from=9)})
    monkeypatch.chdir(tmp_path / "r")
    out = tmp_path / "bisect"
    argv = ["bisect", "--provider", "git", "--good", "first", "--bad", "main", "--out", str(out)]
    command = ["--", sys.executable, "check.py"]
    # the third candidate (commit 6, the middle) stops the run as git bisect run would: exit code above 127
    monkeypatch.setenv("GK_ABORT_AT", "6")
    assert cli.main([*argv, *command]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "exited with code 200 at candidate" in err[0]
    doc = read_bisect(out / "bisect.json")  # valid, complete: written atomically after every round
    assert doc["status"] == "running"
    measured = [c for c in doc["candidates"] if c["rounds"]]
    assert [commit_number(repo, c["ref"]) for c in measured] == [1, 12]
    assert all(c["decisions"] for c in measured)
    # a second run does not silently start over
    monkeypatch.delenv("GK_ABORT_AT")
    assert cli.main([*argv, *command]) == 2
    assert "--resume" in capsys.readouterr().err
    # --resume with a different command is refused: the recorded bisection would not be the same one
    assert cli.main([*argv, "--resume", "--", sys.executable, "other.py"]) == 2
    assert "request.command" in capsys.readouterr().err
    assert cli.main(["bisect", "--resume", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "resuming" in printed
    assert "2 finished round(s) are reused" in printed
    doc = read_bisect(out / "bisect.json")
    assert doc["status"] == "done"
    assert commit_number(repo, doc["candidates"][doc["result"]["first_bad"]]["ref"]) == 9
    assert doc["summary"]["reused"] == 2
    # the endpoints were not run again: one round each
    assert len(doc["candidates"][0]["rounds"]) == 1
    assert len(doc["candidates"][-1]["rounds"]) == 1


def test_git_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    make_repo(tmp_path / "r", 5, lambda i: {"n.txt": str(i), "check.py": CHECK.format(bad_from=3)})
    monkeypatch.chdir(tmp_path / "r")
    run = ["--", sys.executable, "check.py"]

    def bad(*args: str, expect: str) -> None:
        out = tmp_path / f"o{len(list(tmp_path.iterdir()))}"
        assert cli.main(["bisect", "--provider", "git", *args, "--out", str(out), *run]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert expect in err[0], err[0]
        assert "Traceback" not in err[0]

    bad("--good", "main", "--bad", "first", expect="is not older than --bad")
    bad("--good", "main", "--bad", "main", expect="the range is empty")
    bad("--good", "nope", "--bad", "main", expect="'nope' is not a commit here")
    bad("--good", "HEAD~1", "--bad", "main", expect="measures bad (the command exited with 1)")  # commit 4 is bad
    bad("--good", "first", "--bad", "HEAD~3", expect="measures good")  # commit 2 is good: nothing to bisect
    assert (
        cli.main(["bisect", "--provider", "git", "--good", "first", "--bad", "main", "--out", str(tmp_path / "x")]) == 2
    )
    assert "nothing to run" in capsys.readouterr().err
    assert not (tmp_path / "x" / "bisect.json").exists()


def test_without_git_the_provider_says_so(tmp_path, monkeypatch, capsys):
    make_repo(tmp_path / "r", 3, lambda i: {"n.txt": str(i)})
    monkeypatch.chdir(tmp_path / "r")
    empty = tmp_path / "no-tools"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    argv = ["bisect", "--provider", "git", "--good", "first", "--bad", "main", "--out", str(tmp_path / "o")]
    assert cli.main([*argv, "--", "true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gatekeeper: <input>:--provider git: git is not installed; hint: install git (apt-get install git)"]


def _finished(tmp_path, monkeypatch):
    make_repo(tmp_path / "r", 5, lambda i: {"n.txt": str(i), "check.py": CHECK.format(bad_from=4)})
    monkeypatch.chdir(tmp_path / "r")
    out = tmp_path / "bisect"
    argv = ["bisect", "--provider", "git", "--good", "first", "--bad", "main", "--out", str(out)]
    assert cli.main([*argv, "--", sys.executable, "check.py"]) == 0
    return out


def test_a_resumed_bisect_json_names_nothing_that_is_run_or_rendered(tmp_path, monkeypatch, capsys):
    # issue 23 matrix (bisect --resume of a bisect.json with hostile labels): repro/README.md rendered a label's
    # HTML, links and quick actions, and reproduce.sh kept a secret the shell quoting hid from the redactor
    out = _finished(tmp_path, monkeypatch)
    doc = read_bisect(out / "bisect.json")
    hostile = (
        "<img src=x onerror=alert(1)> [a](https://evil.example)\n/approve {'Authorization': 'Bearer Tk-4n8m2b6v0c9x'}"
    )
    for c in doc["candidates"]:
        c["label"] += f" {hostile}"
    write_bisect(out / "bisect.json", doc)
    capsys.readouterr()
    assert cli.main(["bisect", "--resume", "--out", str(out)]) == 0
    assert markdown_problems((out / "repro" / "README.md").read_text()) == []  # as GitLab renders it
    assert "Tk-4n8m2b6v0c9x" not in (out / "repro" / "reproduce.sh").read_text()
    # a ref that is an option to git (git log --output=FILE writes FILE) is refused, never given to git
    doc = read_bisect(out / "bisect.json")
    doc["candidates"][doc["result"]["last_good"]]["ref"] = f"--output={tmp_path / 'written-by-git'}"
    write_bisect(out / "bisect.json", doc)
    capsys.readouterr()
    assert cli.main(["bisect", "--resume", "--out", str(out)]) == 0
    assert "what changed could not be read: InputError:" in capsys.readouterr().out  # said, not obeyed
    assert "is not a full commit SHA" in json.dumps(read_bisect(out / "bisect.json")["result"]["culprits"])
    assert list(tmp_path.glob("written-by-git*")) == []  # git log and git diff each wrote one before
