from __future__ import annotations

import pytest

from gatekeeper.contract.junit import summarize
from gatekeeper.core.errors import InputError

PYTEST_STYLE = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="t.mod" name="ok" time="0.1"/>
<testcase classname="t.mod" name="bad"><failure message="x">trace</failure></testcase>
<testcase classname="t.mod" name="err"><error message="y"/></testcase>
<testcase classname="t.mod" name="skip"><skipped message="z"/></testcase>
</testsuite></testsuites>
"""


def test_counts_and_names(tmp_path):
    (tmp_path / "a.xml").write_text(PYTEST_STYLE)
    (tmp_path / "b.xml").write_text('<testsuite name="x"><testcase name="ok"/></testsuite>')
    s = summarize([tmp_path / "a.xml", tmp_path / "b.xml"])
    assert (s.tests, s.failures, s.errors, s.skipped, s.passed) == (5, 1, 1, 1, 2)
    assert s.pass_rate == 2 / 4
    assert s.failed_names == ("t.mod.bad", "t.mod.err")


def test_entity_expansion_is_refused(tmp_path):
    bomb = tmp_path / "bomb.xml"
    bomb.write_text(
        '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        '<testsuite><testcase name="&b;"/></testsuite>'
    )
    with pytest.raises(InputError, match="refused unsafe XML"):
        summarize([bomb])


def test_external_entity_is_refused(tmp_path):
    xxe = tmp_path / "xxe.xml"
    xxe.write_text(
        '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><testsuite><testcase name="&x;"/></testsuite>'
    )
    with pytest.raises(InputError, match="refused unsafe XML"):
        summarize([xxe])


def test_truncated_file_names_position(tmp_path):
    bad = tmp_path / "t.xml"
    bad.write_text(PYTEST_STYLE[:200])
    with pytest.raises(InputError) as err:
        summarize([bad])
    assert err.value.line().startswith(f"{bad}:")
    assert "malformed XML" in err.value.line()
