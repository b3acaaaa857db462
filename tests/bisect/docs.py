"""The command blocks of docs/release.md that tests run as they are (marked ``<!-- docs-test: NAME -->``)."""

from __future__ import annotations

import re
import shlex

from tests.conftest import REPO


def documented(name: str) -> list[list[str]]:
    """The argv of each command line of the ```sh block after the marker ``name``, without ``gatekeeper``."""
    text = (REPO / "docs" / "release.md").read_text(encoding="utf-8")
    m = re.search(rf"<!-- docs-test: {re.escape(name)} -->\n```sh\n(.*?)\n```", text, re.S)
    assert m, f"docs/release.md has no block marked docs-test: {name}"
    commands = []
    for line in m.group(1).splitlines():
        argv = shlex.split(line)
        assert argv[0] == "gatekeeper", line
        commands.append(argv[1:])
    return commands
