"""Hostile text through every renderer: the output parses, and nothing in it acts (mentions, links, HTML, fences)."""

from __future__ import annotations

import re
import shlex
import tempfile
from pathlib import Path
from xml.etree import ElementTree as ET

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from gatekeeper.analyze.render import render as render_diagnosis
from gatekeeper.contract.stage_report import Check, Environment, StageReport, write_junit
from gatekeeper.core import escape
from gatekeeper.core.redact import MASK
from gatekeeper.evaluate.outputs import banner, reproduce_command, to_junit, to_markdown
from gatekeeper.notify.gitlab_note import MARKER, commit_status, note_body
from gatekeeper.notify.slack_message import build_message
from tests.security import hostile

TOKENS = [
    "<!channel>", "<!here>", "<!everyone>", "<@U0123>", "<#C123|x>", "@all", "@here", "@channel", "@root", "@group/sub",
    "<", ">", "&", "&lt;", "|", "`", "```", "~~~", "\n```\n", "</details>", "<details>", "<summary>", "<!--", "-->",
    "<script>alert(1)</script>", "<img src=x onerror=y>", "[a](https://evil.example)", "![i](https://e.x/i.png)",
    "<https://evil.example|Pipeline>", "https://evil.example", "*", "_", "~", "#1", "!2", "&3", "%m", "$4", "~label",
    "\n/close\n", "/merge", "\n", "\r", "\x1b[2J", "\x1b]8;;https://e\x07", "\x00", "\x0b", "\x7f", "\x85", "\u202e",
    "\ud800", "\ufffe", "| a | b |", "\\", "{+ x +}", "[[_TOC_]]", ":emoji:", "javascript:alert(1)",
]  # fmt: skip
HOSTILE = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from(TOKENS), max_size=12).map("".join),
    st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=5)), max_size=10).map("".join),
)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
LINK_URL = "https://gitlab.example.com/ml/model/-/pipelines/1"
MENTION = re.compile(r"(?<![\w])[@#!&%$~][A-Za-z0-9_]")

# ------------------------------------------------------------------ Slack


def _mrkdwn_texts(message: dict) -> list[str]:
    texts = [message["text"]]
    for block in message["blocks"]:
        if block["type"] == "section":
            texts.append(block["text"]["text"])
    return texts


def _assert_slack_safe(message: dict) -> None:
    for block in message["blocks"]:
        assert not CONTROL.search(block["text"]["text"]), block
    for text in _mrkdwn_texts(message):
        rest = re.sub(r"<https://gitlab\.example\.com/ml/model/-/pipelines/1\|[^<>|]*>", "", text)
        assert "<" not in rest, text  # no <!channel>, <@U..>, <url|spoof>
        assert ">" not in rest, text
        assert not re.search(r"@(here|channel|everyone|all)\b", text), text
        assert text.count("```") % 2 == 0, text  # a log line cannot close the code block


@SETTINGS
@given(HOSTILE)
def test_slack_message_never_carries_a_mention_link_or_open_fence(text: str) -> None:
    _assert_slack_safe(build_message(hostile.alert(text), kind="started", severity="critical"))


def test_slack_message_with_every_injection_at_once() -> None:
    message = build_message(hostile.alert(), kind="started", severity="critical")
    _assert_slack_safe(message)
    assert "&lt;!channel&gt;" in message["blocks"][2]["text"]["text"]  # shown as text, not removed


# ------------------------------------------------------------------ GitLab markdown

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_OUR_HTML = {MARKER, "<details><summary>Reproduce</summary>", "</details>"}


def _walk(tokens: list) -> list:
    out = []
    for t in tokens:
        out.append(t)
        out += _walk(t.children or [])
    return out


def _assert_markdown_safe(body: str, *, fences: int, links: int) -> None:
    assert not CONTROL.search(body)
    tokens = _walk(_MD.parse(body))
    html = [t.content.strip() for t in tokens if t.type in ("html_block", "html_inline")]
    assert all(h in _OUR_HTML for h in html), html  # no raw HTML from the input, no early </details>
    assert html.count("</details>") == html.count("<details><summary>Reproduce</summary>")
    hrefs = [t.attrs.get("href") for t in tokens if t.type == "link_open"]
    assert all(h == LINK_URL for h in hrefs), hrefs
    assert len(hrefs) == links, hrefs
    assert not [t for t in tokens if t.type == "image"]
    assert len([t for t in tokens if t.type == "fence"]) == fences  # a log line cannot close or open one
    for t in tokens:
        if t.type == "text":
            assert not MENTION.search(t.content), t.content  # @all, #1, !2 outside code would notify/reference
    code_lines = {i for t in tokens if t.type == "fence" and t.map for i in range(*t.map)}
    for i, line in enumerate(body.splitlines()):
        if i not in code_lines:
            assert not line.lstrip().startswith("/"), line  # a quick action (/close, /merge)
        assert not line.startswith("/"), line  # not in a code block either: GitLab may not see a long fence


@SETTINGS
@given(HOSTILE)
def test_merge_request_note_shows_hostile_text_as_text(text: str) -> None:
    _assert_markdown_safe(note_body(hostile.alert(text)), fences=2, links=3)


@SETTINGS
@given(HOSTILE)
def test_verdict_markdown_shows_hostile_text_as_text(text: str) -> None:
    _assert_markdown_safe(to_markdown(hostile.verdict(text, text, text)), fences=1, links=0)


@SETTINGS
@given(HOSTILE)
def test_analysis_markdown_shows_hostile_text_as_text(text: str) -> None:
    _assert_markdown_safe(render_diagnosis(hostile.diagnosis(text), "md"), fences=1, links=1)


def test_note_with_every_injection_at_once_keeps_the_words() -> None:
    body = note_body(hostile.alert())
    _assert_markdown_safe(body, fences=2, links=3)
    assert "&lt;/details>" in body
    assert "@\u200ball" in body


def test_commit_status_description_has_no_control_characters() -> None:
    status = commit_status(hostile.alert())
    assert not CONTROL.search(status["description"])


# ------------------------------------------------------------------ XML and terminal


# An oracle written from the XML 1.0 Char production, character by character, independent of escape.xml_text:
# what a document can carry stays as it is; anything else, and C1 and bidi controls, is shown as \xNN / \uNNNN.
def _carried(text: str) -> str:
    def one(c: str) -> str:
        o = ord(c)
        legal = o in (0x9, 0xA, 0xD) or 0x20 <= o <= 0xD7FF or 0xE000 <= o <= 0xFFFD or 0x10000 <= o <= 0x10FFFF
        if legal and not (0x7F <= o <= 0x9F or 0x202A <= o <= 0x202E or 0x2066 <= o <= 0x2069):
            return c
        return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"

    return "".join(one(c) for c in text)


def _as_parsed(text: str) -> str:
    """Element text as an XML parser hands it back (line ends normalised, XML 1.0 section 2.11)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


@SETTINGS
@given(HOSTILE)
def test_gates_junit_is_well_formed_xml_and_carries_every_name_and_reason(text: str) -> None:
    root = ET.fromstring(to_junit(hostile.verdict(text, text, text)))
    cases = list(root.iter("testcase"))
    assert [c.get("name") for c in cases] == [_carried(text + s) for s in ("", "2", "3")] + [_carried(f"stage.{text}")]
    assert (cases[0].find("failure").get("message") or "") == _carried(text[:500])  # type: ignore[union-attr]
    assert cases[0].find("system-out").text.startswith(_as_parsed(_carried(f"{text}\nmetric: m\nrule: {text}")))  # type: ignore[union-attr]


@SETTINGS
@given(HOSTILE)
def test_stage_junit_is_well_formed_xml_and_carries_the_check(text: str) -> None:
    check = Check(name=text or "x", status="failed", message=text, group=text)
    report = StageReport(
        stage="functional_test", status="failed", started_at="2026-12-02T15:00:00+00:00", duration_s=1.0,
        environment=Environment(torch_version=None, python="3.11", host=text), checks=(check,),
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        written = write_junit(report, Path(tmp) / "x.junit.xml")
        raw = written.read_text(encoding="utf-8")
    # every file is written through the redactor (security.md), which may mask a URL-shaped text
    assume(MASK not in raw)
    root = ET.fromstring(raw.encode("utf-8"))
    suite = root.find("testsuite")
    case = root.find("testsuite/testcase")
    assert suite is not None
    assert case is not None
    assert suite.get("hostname") == _carried(text)
    assert case.get("name") == _carried(text or "x")
    assert case.get("classname") == _carried(f"functional_test.{text}" if text else "functional_test")
    assert (case.find("failure").get("message") or "") == _carried(
        text.strip().splitlines()[0][:500] if text.strip() else ""
    )  # type: ignore[union-attr]
    assert (case.find("system-out").text or "") == _as_parsed(_carried(text))  # type: ignore[union-attr]


@SETTINGS
@given(HOSTILE)
def test_terminal_output_has_no_control_characters(text: str) -> None:
    assert not CONTROL.search(banner(hostile.verdict(text, text, text)))
    assert not CONTROL.search(render_diagnosis(hostile.diagnosis(text), "text"))
    assert not CONTROL.search(escape.terminal(text))


def test_cli_error_line_has_no_escape_sequences(tmp_path, capsys) -> None:
    from gatekeeper.cli import main

    bad = tmp_path / "g\x1b[2J\x1b]0;title\x07.yaml"  # a name from a hostile checkout
    assert main(["evaluate", "--artifacts", str(tmp_path), "--gates", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert err.count("\n") == 1


# ------------------------------------------------------------------ the escaping functions themselves


@SETTINGS
@given(HOSTILE)
def test_xml_text_is_always_carried_by_xml(text: str) -> None:
    safe = escape.xml_text(text)
    assert safe == _carried(text)  # every character carried, or shown as \xNN (the XML 1.0 Char production)
    assert ET.fromstring(ET.tostring(ET.Element("a", name=safe))).get("name") == safe
    el = ET.Element("a", name=escape.xml_text(text))
    el.text = escape.xml_text(text)
    ET.fromstring(ET.tostring(el))


def test_no_line_of_a_code_block_starts_a_quick_action() -> None:
    """Issue 23: a fence of four backticks (a line holds three) may not be code to GitLab's quick-action finder."""
    block = escape.md_code_block(["```", "/merge", "/approve", "  /close", "x /label ~a"])
    assert block.startswith("````")
    assert not [line for line in block.splitlines() if line.startswith("/")]
    assert " /merge" in block.splitlines()


@SETTINGS
@given(HOSTILE)
def test_md_code_block_cannot_be_closed_by_its_lines(text: str) -> None:
    tokens = _MD.parse(escape.md_code_block(text.split("\n"), "sh") + "\n\n<div>after</div>\n")
    assert next(t.type for t in tokens) == "fence"
    assert tokens[-1].type == "html_block"


@SETTINGS
@given(HOSTILE, HOSTILE)
def test_md_link_links_only_http_urls_and_never_lets_the_label_out(url: str, label: str) -> None:
    tokens = _walk(_MD.parse(escape.md_link(url, label)))
    hrefs = [t.attrs["href"] for t in tokens if t.type == "link_open"]
    assert len(hrefs) <= 1
    assert all(h.startswith(("http://", "https://")) for h in hrefs)
    assert not [t for t in tokens if t.type in ("html_inline", "html_block", "image")]


@SETTINGS
@given(HOSTILE, HOSTILE)
def test_slack_link_is_one_link_at_most(url: str, label: str) -> None:
    text = escape.slack_link(url, label)
    assert text.count("<") == text.count(">") <= 1
    assert not text.startswith("<") or re.fullmatch(r"<https?://[^<>|\s]+\|[^<>]*>", text)


def test_a_shell_word_is_redacted_before_it_is_quoted() -> None:
    # issue 23 matrix (report of a verdict whose gates_file holds a secret; bisect --resume of hostile labels):
    # shlex.quote turns {'Authorization': 'Bearer X'} into '{'"'"'Authorization'"'"': ..., a shape the redactor of
    # the written file no longer knows
    secret = "g.yaml {'Authorization': 'Bearer Bearer-hdr-5t7y9u1i3o', 'PRIVATE-TOKEN': 'Ptk-hdr-2w4e6r8t0y'}"
    for text in (
        escape.shell(secret),
        escape.shell_join(["gatekeeper", "--gates", secret]),
        reproduce_command(artifacts="artifacts", gates=secret, channel="stable"),
    ):
        assert "Bearer-hdr-5t7y9u1i3o" not in text
        assert "Ptk-hdr-2w4e6r8t0y" not in text
    assert shlex.split(escape.shell_join(["a b", "c'd"])) == ["a b", "c'd"]  # still one word each


@given(HOSTILE)
def test_a_csv_cell_never_starts_a_spreadsheet_formula(text: str) -> None:
    # 2026-12-04 audit: matrix.csv wrote a record's torch version as it was; "=HYPERLINK(...)" ran as a formula
    import csv
    import io

    cell = escape.csv_cell(text)
    assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r")
    buf = io.StringIO()
    csv.writer(buf).writerow([cell, "x"])
    assert next(csv.reader(io.StringIO(buf.getvalue()))) == [cell, "x"]  # still one cell, whatever it holds
    plain = escape.csv_cell("2.6.0+rocm6.2")
    assert plain == "2.6.0+rocm6.2"  # only a leading formula character is changed
    assert escape.csv_cell("=1+1") == "'=1+1"
    assert "Pw-db-9f3k2j1h7g" not in escape.csv_cell("-x export DB_PASSWORD=Pw-db-9f3k2j1h7g")  # redacted first


@SETTINGS
@given(HOSTILE)
def test_the_metrics_report_is_one_ascii_name_and_one_number_per_line(text: str) -> None:
    # GitLab's metrics report (metrics.txt) is "name value" lines: a point gate's name carries a sweep key from
    # the artifact (gate[dtype=...]), so a newline, "=", space or non-ASCII letter in it could forge a line or a
    # metric; evaluate.outputs._NAME keeps [A-Za-z0-9_] only (2026-12-04 audit: already defended, now held)
    from gatekeeper.evaluate.outputs import to_metrics_txt

    lines = to_metrics_txt(hostile.verdict(text, text, text)).split("\n")
    assert lines[-1] == ""
    assert lines[0] == "gatekeeper_result 1"
    for line in lines[1:-1]:
        assert re.fullmatch(r"gate_[A-Za-z0-9_]*(_change_pct)? -?[0-9.e+-]+", line), line


def test_an_html_link_is_only_an_http_url() -> None:
    # 2026-12-04 audit: the report's and the matrix page's links (a verdict's pipeline_url, a record's link)
    for url in ("javascript:alert(1)", "JaVaScRiPt:alert(1)", " data:text/html,x", "vbscript:x", "//evil.invalid/x"):
        assert escape.html_url(url) is None, url
    assert escape.html_url("https://h.invalid/a?b=1&c=2") == "https://h.invalid/a?b=1&amp;c=2"
    assert escape.html_url(None) is None
