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
    assert (s.failure_names, s.error_names) == (("t.mod.bad",), ("t.mod.err",))


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


# --- the scan (raw bytes over a document expat checked) against the callbacks: same answers ---------------

import codecs  # noqa: E402
from pathlib import Path  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gatekeeper.contract import junit  # noqa: E402

_TEXT = st.sampled_from(
    ["", "x", "testcase", "a &lt;testcase&gt; b", "1 &amp; 2", "t>gt", "é", "<![CDATA[<testcase/>]]>"]
)
_ATTR = st.sampled_from(["", ' name="n"', ' classname="c.d" name="a&amp;b"', " name='q>1'", ' name="testcase"'])
_PREFIX = st.sampled_from(["", "", "", "j:", "é:"])


@st.composite
def _case(draw: st.DrawFn, depth: int = 0) -> str:
    p = draw(_PREFIX)
    attrs = draw(_ATTR)
    kids = draw(st.lists(st.sampled_from(["failure", "error", "skipped", "system-out", "properties"]), max_size=3))
    if not kids and draw(st.booleans()):
        return f"<{p}testcase{attrs}/>"
    inner = ""
    for k in kids:
        kp = draw(_PREFIX)
        inner += f"<{kp}{k} message='m'>{draw(_TEXT)}</{kp}{k}>" if draw(st.booleans()) else f"<{kp}{k}/>"
    if depth == 0 and draw(st.integers(0, 9)) == 0:
        inner += draw(_case(depth=1))  # a nested test case: not JUnit, but both ways must agree
    return f"<{p}testcase{attrs}>{inner}{draw(_TEXT)}</{p}testcase>"


@st.composite
def _document(draw: st.DrawFn) -> str:
    body = ""
    for _ in range(draw(st.integers(0, 8))):
        body += draw(_case())
        extra = draw(st.integers(0, 12))
        if extra == 0:
            body += "<failure/>"  # outside any test case: not counted either way
        elif extra == 1:
            body += "<!-- <testcase name='commented'/> -->"
        elif extra == 2:
            body += "<testcases/><testcase-x/>"
        elif extra == 3:
            body += "<?pi data?>"
    return f'<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="s">{body}</testsuite></testsuites>\n'


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_document(), chunk=st.sampled_from([3, 7, 64, 1 << 18]))
def test_the_scan_and_the_callbacks_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc: str, chunk: int
) -> None:
    monkeypatch.setattr(junit, "_CHUNK", chunk)  # tags cut at every place by chunk ends
    path = tmp_path / "r.xml"
    path.write_bytes(doc.encode("utf-8"))
    scanned: tuple[list[str], list[str]] = ([], [])
    called: tuple[list[str], list[str]] = ([], [])
    assert junit._count(path, scanned, scan=True) == junit._count(path, called, scan=False), doc
    assert scanned == called


def test_the_scan_is_taken_for_plain_files_and_left_for_what_it_cannot_read(tmp_path, monkeypatch):
    calls: list[str] = []
    real = junit._callbacks

    def spy(fh, names):
        calls.append("callbacks")
        return real(fh, names)

    monkeypatch.setattr(junit, "_callbacks", spy)
    plain = tmp_path / "plain.xml"
    plain.write_text(PYTEST_STYLE)
    assert summarize([plain]).tests == 4
    assert calls == []
    for name, data in (
        ("comment.xml", PYTEST_STYLE.replace("<testsuite ", "<!-- c --><testsuite ").encode()),
        ("utf16.xml", codecs.BOM_UTF16_LE + PYTEST_STYLE.replace("utf-8", "utf-16").encode("utf-16-le")),
        ("cp1252.xml", PYTEST_STYLE.replace("utf-8", "windows-1252").encode()),
    ):
        (tmp_path / name).write_bytes(data)
        s = summarize([tmp_path / name])
        assert (s.tests, s.failures, s.errors, s.skipped) == (4, 1, 1, 1), name
    assert calls == ["callbacks"] * 3
    monkeypatch.setattr(junit, "_MAX_CARRY", 10)  # a test case bigger than the carry: callbacks from the start
    monkeypatch.setattr(junit, "_CHUNK", 16)
    called = summarize([plain])
    assert (called.failure_names, called.error_names) == (("t.mod.bad",), ("t.mod.err",))
    assert calls == ["callbacks"] * 4


def test_malformed_and_unsafe_files_fail_the_same_on_the_scan(tmp_path):
    late = tmp_path / "late.xml"
    late.write_text(PYTEST_STYLE + "<oops>")  # well-formed until the very end
    with pytest.raises(InputError, match="malformed XML: junk after document element"):
        summarize([late])
    bomb = tmp_path / "bomb.xml"
    bomb.write_text('<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "x">]><testsuite/>')
    with pytest.raises(InputError, match="refused unsafe XML"):
        summarize([bomb])


@pytest.mark.parametrize("scan", [True, False])
def test_a_document_that_is_not_junit_is_refused(tmp_path, scan):
    # Well-formed but no JUnit report: no test case in it, so a failures gate would pass on it (fail closed)
    page = tmp_path / "page.xml"
    page.write_text('<?xml version="1.0"?><html><body><testcase name="t"/></body></html>')
    with pytest.raises(InputError, match=r"not a JUnit report: the root element is <html>"):
        junit._count(page, ([], []), scan=scan)
    for root in ("testsuite", "testsuites", "j:testsuites"):  # a namespace prefix is allowed, as for test cases
        ok = tmp_path / f"{root.replace(':', '_')}.xml"
        ok.write_text(f'<{root} xmlns:j="urn:j"><testcase name="t"/></{root}>')
        assert junit._count(ok, ([], []), scan=scan) == (1, 0, 0, 0)


class _Reads:
    """A file object that records the size of every read (how often expat is handed a tag again)."""

    def __init__(self, fh):
        self.fh, self.sizes = fh, []

    def read(self, n=-1):
        self.sizes.append(n)
        return self.fh.read(n)

    def __getattr__(self, name):
        return getattr(self.fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


@pytest.mark.parametrize("scan", [True, False])
def test_a_huge_tag_is_read_in_growing_chunks(tmp_path, monkeypatch, scan):
    # Expat parses a tag cut by a chunk's end again from its start: a 1 MiB attribute in 1 KiB chunks is
    # parsed 1,024 times (quadratic: a 24 MiB test name hung evaluate for minutes). The reads double instead.
    reads: list[_Reads] = []
    real = junit.open_regular

    def spy(path, **kw):
        reads.append(_Reads(real(path, **kw)))
        return reads[-1]

    monkeypatch.setattr(junit, "open_regular", spy)
    monkeypatch.setattr(junit, "_CHUNK", 1024)
    monkeypatch.setattr(junit, "_MAX_CARRY", 1 << 30)  # the scan keeps to itself (no fall-back to callbacks)
    big = tmp_path / "big.xml"
    big.write_bytes(b'<testsuite><testcase name="' + b"A" * (1 << 20) + b'"><failure/></testcase></testsuite>')
    assert junit._count(big, ([], []), scan=scan) == (1, 1, 0, 0)
    sizes = reads[0].sizes[1 if scan else 0 :]  # the scan's first read is its look at the head
    assert len(sizes) < 20, sizes  # 1 KiB, 1 KiB, 2 KiB, 4 KiB, ... 1 MiB: about log2(1024) reads, not 1,024


def test_a_tag_beyond_the_token_bound_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(junit, "_MAX_TOKEN", 1 << 16)
    big = tmp_path / "big.xml"
    big.write_bytes(b'<testsuite>\n<testcase name="' + b"A" * (1 << 18) + b'"/></testsuite>')
    for scan in (True, False):
        with pytest.raises(InputError) as err:
            junit._count(big, ([], []), scan=scan)
        assert err.value.line().startswith(f"{big}:2:1: one tag or comment is over "), err.value.line()


def test_refusals_name_the_place_and_stay_one_short_line(tmp_path):
    dtd = tmp_path / "dtd.xml"
    dtd.write_text('<?xml version="1.0"?>\n\n<!DOCTYPE t [<!ENTITY a "x">]><testsuite/>')
    long_name = tmp_path / "enc.xml"
    long_name.write_bytes(b'<?xml version="1.0" encoding="' + b"A" * 100_000 + b'"?><testsuites/>')
    for path, start in ((dtd, f"{dtd}:3:"), (long_name, f"{long_name}:1:1: unknown XML encoding")):
        for scan in (True, False):
            with pytest.raises(InputError) as err:
                junit._count(path, ([], []), scan=scan)
            line = err.value.line()
            assert line.startswith(start), line  # the DTD's line (its column: where expat reports the declaration)
            assert len(line) < 300, len(line)  # the file's encoding name is not echoed whole
