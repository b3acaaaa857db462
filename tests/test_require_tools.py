"""Under GATEKEEPER_REQUIRE_TOOLS=1 (CI) a skip is a failure, by the one hook in tests/conftest.py.

Each case runs pytest in a subprocess on planted test files with tests/conftest.py loaded as a plugin:
a dependency made unimportable by a sitecustomize (the way a broken install looks), a skip mark, a
pytest.skip in a fixture. Only a hardware fact may skip, and it is listed at the end of the run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gatekeeper.core import proc

REPO = Path(__file__).resolve().parents[1]

PLANTED = {
    "test_planted_ok.py": "def test_ok():\n    pass\n",
    "test_planted_import.py": (
        "import pytest\n"
        "mpl = pytest.importorskip('matplotlib')\n\n"
        "def test_draws():\n    assert mpl.__name__ == 'matplotlib'\n"
    ),
    "test_planted_marks.py": (
        "import pytest\n\n"
        "@pytest.fixture\ndef tool():\n    pytest.skip('gitlab-ci-local not installed')\n\n"
        "@pytest.mark.skipif(True, reason='onnxruntime not installed')\ndef test_mark():\n    pass\n\n"
        "def test_fixture(tool):\n    pass\n\n"
        "def test_body():\n    pytest.skip('no compiler')\n\n"
        "def test_passes():\n    pass\n"
    ),
    "test_planted_hardware.py": (
        "import pytest\nfrom tests.conftest import hardware_skip\n\n"
        "def test_needs_a_gpu():\n    pytest.skip(hardware_skip('no GPU', 'torch.cuda.is_available() is False'))\n"
    ),
}
# The way a broken install looks: the package is there in name, and importing it fails.
SITECUSTOMIZE = "import sys\nsys.modules['matplotlib'] = None\n"


def _pytest(tmp_path: Path, require: bool, *files: str) -> proc.ProcResult:
    for name, text in PLANTED.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "GATEKEEPER_REQUIRE_TOOLS"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO)])
    if require:
        env["GATEKEEPER_REQUIRE_TOOLS"] = "1"
    argv = [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-rA", "-q"]
    argv += ["--rootdir", str(tmp_path), "-c", os.devnull, *[str(tmp_path / f) for f in files]]
    return proc.run(argv, timeout=300, cwd=tmp_path, env=env)


@pytest.mark.slow
def test_an_unimportable_dependency_fails_under_require_tools(tmp_path: Path) -> None:
    relaxed = _pytest(tmp_path, False, "test_planted_import.py", "test_planted_ok.py")
    assert relaxed.returncode == 0, relaxed.stdout
    assert "1 passed, 1 skipped" in relaxed.stdout.splitlines()[-1]
    strict = _pytest(tmp_path, True, "test_planted_import.py", "test_planted_ok.py")
    assert strict.returncode != 0, strict.stdout  # pytest's 1 (failed) or 2 (collection error): not a pass
    assert "GATEKEEPER_REQUIRE_TOOLS=1: a skip is a failure here (could not import 'matplotlib'" in strict.stdout
    assert "skipped" not in strict.stdout.splitlines()[-1]


@pytest.mark.slow
def test_every_kind_of_skip_fails_and_a_hardware_fact_is_listed(tmp_path: Path) -> None:
    res = _pytest(tmp_path, True, "test_planted_marks.py", "test_planted_hardware.py")
    assert res.returncode == 1, res.stdout
    last = res.stdout.splitlines()[-1]
    # a skip in setup (a mark, a fixture) is an error, one in the test body a failure; the hardware fact skips
    assert last.startswith("1 failed, 1 passed, 1 skipped, 2 errors in "), last
    for reason in ("onnxruntime not installed", "gitlab-ci-local not installed", "no compiler"):
        assert f"a skip is a failure here ({reason})" in res.stdout, reason
    summary = res.stdout.split("skipped for a hardware fact (allowed under GATEKEEPER_REQUIRE_TOOLS=1)")[1]
    assert "test_planted_hardware.py::test_needs_a_gpu: hardware: no GPU: torch.cuda.is_available() is False" in (
        summary
    )
    relaxed = _pytest(tmp_path, False, "test_planted_marks.py")
    assert relaxed.returncode == 0, relaxed.stdout
    assert "3 skipped" in relaxed.stdout.splitlines()[-1]


def test_a_hardware_reason_names_a_listed_fact() -> None:
    from tests.conftest import hardware_skip

    assert hardware_skip("no GPU") == "hardware: no GPU"
    with pytest.raises(ValueError, match="not a hardware fact"):
        hardware_skip("no onnxruntime")
