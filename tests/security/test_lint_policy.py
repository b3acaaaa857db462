"""bandit runs in make lint, and every finding it is told to skip carries its reason on the same line."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_make_lint_runs_bandit_and_make_audit_runs_pip_audit_over_the_lock():
    makefile = (REPO / "Makefile").read_text()
    lint = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "bandit -q -r gatekeeper" in lint
    audit = makefile.split("\naudit:", 1)[1].split("\n\n", 1)[0]
    assert "pip-audit --requirement requirements.lock" in audit
    lock = (REPO / "requirements.lock").read_text().splitlines()
    assert lock
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==\S+", line) for line in lock)


def test_every_nosec_names_its_test_and_gives_a_reason():
    bare = []
    for path in [*(REPO / "gatekeeper").rglob("*.py"), *(REPO / "stages").rglob("*.py")]:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "# nosec" not in line:
                continue
            before, after = line.split("# nosec", 1)
            reason = before.split("#", 1)[1] if "#" in before else ""
            if not re.fullmatch(r"\s*B\d{3}(,\s*B\d{3})*\s*", after) or len(reason.strip(" -:")) < 4:
                bare.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not bare, "write '<why>  # nosec BXXX' (the reason before the marker):\n" + "\n".join(bare)
