"""Keep secrets out of logs, artifacts, reports and exception messages: one redactor for every writer.

Three layers:

- by name: the values of environment variables whose names say they are secret
  (a segment of the name is a secret word: DB_PASSWORD, SERVICE_TOKEN,
  REGISTRY_CREDS, SLACK_WEBHOOK_URL; ``is_secret_name``) are replaced wherever
  they appear, also URL-encoded or JSON-escaped;
- by shape: what is a secret whatever variable it came from: the password
  (or token) in a URL's userinfo, secret-looking query parameters
  (``access_token=``, ``api_key=``...), bearer and private-token headers,
  private-key blocks, and the token prefixes of GitLab, Slack, GitHub, Hugging
  Face, AWS, PyPI and npm;
- by structure: a secret-named key and its value in every form text writes them
  (``export DB_PASSWORD=...``, ``SERVICE_TOKEN="..."``, ``--db-passwd=...``,
  ``db_password: ...``, ``X-Api-Key: ...``, ``"password": "..."``,
  ``{'Authorization': 'Bearer ...', 'PRIVATE-TOKEN': '...'}``, also inside a
  JSON string), whatever the value looks like. The name is judged by segment, so
  KEYBOARD, PASSED and TOKENIZERS_PARALLELISM stay readable.

``files.atomic_write`` and ``files.write_json`` redact what they write and the
CLI redacts stdout and stderr, so a command cannot write a secret by
forgetting to call this module.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, TextIO, TypeVar, cast
from urllib.parse import quote

T = TypeVar("T")

__all__ = [
    "MASK",
    "RedactingStream",
    "is_secret_key",
    "is_secret_name",
    "redact",
    "redact_env",
    "redact_fields",
    "redact_obj",
]

MASK = "[REDACTED]"

# Names are judged by segment (split at "_", "-" and spaces; case does not matter), never by substring, so
# KEYBOARD, PASSED, TOKENIZERS_PARALLELISM, GIT_AUTHOR_NAME, MONKEY and KeyError stay readable.
# A strong word makes a name secret as a segment or at the end of one, alone too: DB_PASSWORD, SERVICE_TOKEN,
# PGPASSWORD, clientSecret, accessToken, "password", Authorization.
_STRONG = (
    *("PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "TOKEN", "SECRET", "SECRETS", "CREDENTIAL", "CREDENTIALS"),
    *("APIKEY", "ACCESSKEY", "PRIVATEKEY", "SECRETKEY", "SIGNINGKEY", "WEBHOOK", "AUTHORIZATION", "COOKIE"),
)
# A weak word is a whole segment that is a secret in DB_PASS, X-Api-Key, GITLAB_AUTH, MYSQL_PWD, REGISTRY_CREDS,
# but is also an ordinary word. In an environment variable's name any segment counts (its value is then hidden
# wherever it appears). In text (the pairs below) it counts only as the last segment of a longer name: "pass:"
# and "key:" are gates.yaml's and GitLab's own keys, op_pass_rate and key_id hold no secret.
_WEAK = frozenset({"PASS", "PWD", "KEY", "AUTH", "CRED", "CREDS", "DSN", "SESSION", "SIGNATURE", "PRIVATE"})
_SEGMENT_SPLIT = re.compile(r"[_\-\s]+")
_NOT_SECRET = re.compile(
    r"^(GIT_(AUTHOR|COMMITTER)_(NAME|EMAIL|DATE)|.*_PUBLIC_KEY_ID|SSH_AUTH_SOCK|PWD|OLDPWD)$", re.I
)
# Every secret word contains one of these: a cheap first test of a name before it is split.
_HINT = r"(?i:pass|pwd|key|auth|cred|token|secret|dsn|cookie|session|signature|private|webhook)"

_QUERY_KEYS = (
    r"access_token|refresh_token|id_token|token|private_token|api_?key|apikey|key|secret|client_secret|"
    r"password|passwd|pwd|pass|auth|signature|sig|x-amz-signature|x-amz-credential|x-amz-security-token|"
    r"code|session|sessionid"
)
# Value characters: never a quote, backslash or whitespace, so a match cannot cut a JSON escape in half.
_V = r"[^\s'\"\\&#<>]"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # whole tokens
    (re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]+"), MASK),
    (re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{8,}"), MASK),
    (re.compile(r"\bxapp-[A-Za-z0-9-]{8,}"), MASK),
    (re.compile(r"\bglpat-[A-Za-z0-9_\-]{16,}"), MASK),
    (re.compile(r"\bgl(?:cbt|dt|ptt|ft|rt|soat|imt|agent|oas|wt)-[A-Za-z0-9_\-]{16,}"), MASK),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), MASK),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}"), MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), MASK),
    (re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b"), MASK),
    (re.compile(r"\bpypi-[A-Za-z0-9_\-]{40,}"), MASK),
    (re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MASK),  # a JWT
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S),
        "-----BEGIN PRIVATE KEY----- " + MASK,
    ),
    # a line of a key block seen without its BEGIN line (a log excerpt): long mixed-case base64
    (re.compile(r"(?<![A-Za-z0-9+/])(?=[A-Za-z0-9+/]*[A-Z])(?=[A-Za-z0-9+/]*[a-z])[A-Za-z0-9+/]{60,}={0,2}"), MASK),
    # headers
    (re.compile(r"(?i)(authorization:\s*(?:bearer|token|basic)\s+)[^\s'\"\\]+"), r"\1" + MASK),
    (re.compile(r"(?i)((?:private|job|deploy)-token:\s*)[^\s'\"\\]+"), r"\1" + MASK),
]
# applied after _mask_userinfo: the URL user parts come first, as when they were regexes in _PATTERNS
_PAIR_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # query parameters and key=value pairs (libpq DSNs, logs)
    (re.compile(rf"(?i)([?&;](?:{_QUERY_KEYS})=){_V}+"), r"\1" + MASK),
]

# URL userinfo is masked by a scan (_mask_userinfo), not by a regex: the regex for "everything between
# "://" and the last "@" before the host" backtracked cubically (12 KB of "a://b:" took 88 s).
_URL_TOKEN_END = re.compile(r"[\s'\"\\<>]")  # what ends a URL in text
_HOST_START = re.compile(r"[A-Za-z0-9\[]")
_BARE_USER = re.compile(r"[A-Za-z0-9_\-]{16,}@(?=[A-Za-z0-9\[])")  # https://<token>@host, Sentry DSNs
_SCHEME_CHAR = re.compile(r"[A-Za-z0-9+.\-]")

_MIN_SECRET_LEN = 6  # shorter values ("1", "true") would mask half a log


def _segments(name: str) -> list[str]:
    return [s for s in _SEGMENT_SPLIT.split(name.upper()) if s]


def is_secret_name(name: str) -> bool:
    """An environment variable whose value is a secret: a segment of ``name`` is a strong or weak secret word."""
    if _NOT_SECRET.match(name):
        return False
    return any(s in _WEAK or s.endswith(_STRONG) for s in _segments(name))


def is_secret_key(name: str) -> bool:
    """A key in text (``name=value``, ``name: value``, ``"name": "value"``) whose value is a secret: a strong word
    in any segment, or a weak word as the last segment of a name of two or more."""
    if _NOT_SECRET.match(name):
        return False
    segments = _segments(name)
    return any(s.endswith(_STRONG) for s in segments) or (len(segments) > 1 and segments[-1] in _WEAK)


# ------------------------------------------------------------------ pairs: a secret-named key and its value
#
# The forms a log, an env dump, a config file or a printed structure writes a name and its value in:
#   export DB_PASSWORD=value    SERVICE_TOKEN="value"    --db-passwd=value    password = 'value'   (=)
#   db_password: value          X-Api-Key: value         Authorization: Digest ...               (: to the line end)
#   "password": "value"         'PRIVATE-TOKEN': 'value'                                         (a quoted key)
# Each name is checked by segment (is_secret_name) in Python, not by the regex, so the patterns stay simple:
# every quantifier is possessive and a name is only tried where a name starts, so matching is linear.
# A value never takes a quote or a backslash it did not open (a match cannot cut a JSON string in half).
_N = r"[A-Za-z0-9_.\-]"
_DQ = r'"(?:[^"\\\n]|\\.)*+"'
_SQ = r"'(?:[^'\\\n]|\\.)*+'"
# the same string inside a JSON string (a serialised log line): \"value\"
_EDQ = r'\\"(?:\\\\\\"|[^"\\\n]|\\[^"\n])*+\\"'  # an escaped \" inside it is \\\" there
# A pair is found in two steps: its name and separator, then (for a secret name only) its value. A regex that took
# the value of every hinted name at once let a harmless one swallow the rest of its line, and a secret with it:
# "tokenizer: bert HF_TOKEN=hf_..." and "not passing: t DB_PASSWORD=..." were shown whole.
_UNQUOTED_NAME = re.compile(rf"(?<!{_N})-*+(?P<name>(?={_N}*?{_HINT})[A-Za-z_]{_N}*+)[ \t]*+(?P<sep>[:=])[ \t]*+")
_QUOTED_NAME = re.compile(rf"(?P<q>\\?[\"'])(?P<name>(?={_N}*?{_HINT}){_N}++)(?P=q)[ \t]*+[:=][ \t]*+")
_QUOTED = rf"{_DQ}|{_SQ}|{_EDQ}"
_EQ_VALUE = re.compile(rf"{_QUOTED}|[^\s'\"\\<>]++")  # name=value: up to a space or a quote it did not open
_COLON_VALUE = re.compile(rf"{_QUOTED}|[^\n'\"\\]++")  # name: value: to the line's end
_QUOTED_VALUE = re.compile(_QUOTED)

# An Authorization value keeps its scheme: "Bearer [REDACTED]" says what was there.
_SCHEME = re.compile(r"(?i)(?:bearer|basic|token|digest|negotiate|bot|oauth|aws4-hmac-sha256)\s+")


def _masked_value(value: str) -> str:
    quote_char = next((q for q in ('\\"', '"', "'") if value.startswith(q)), "")
    if len(value) < 2 * len(quote_char) or not value.endswith(quote_char):
        quote_char = ""
    inner = value[len(quote_char) : len(value) - len(quote_char)]
    if inner.startswith(MASK) or not inner.strip():
        return value  # already masked by an earlier layer, or nothing to hide
    scheme = _SCHEME.match(inner)
    kept = scheme.group(0) if scheme and scheme.end() < len(inner) else ""
    return f"{quote_char}{kept}{MASK}{quote_char}"


def _mask_values(text: str, names: re.Pattern[str], value_of: Callable[[re.Match[str]], re.Pattern[str]]) -> str:
    """Each secret ``names`` match's value masked; names inside a masked value are passed over. One scan for
    names, and a value is matched only after a secret name and never scanned twice: linear in ``text``."""
    out: list[str] = []
    done = 0  # text[:done] is in out
    for m in names.finditer(text):
        if m.start() < done or not is_secret_key(m.group("name")):
            continue
        value = value_of(m).match(text, m.end())
        if value is None:
            continue
        out += [text[done : m.end()], _masked_value(value.group())]
        done = value.end()
    return "".join(out) + text[done:]


def _unquoted_value(match: re.Match[str]) -> re.Pattern[str]:
    return _EQ_VALUE if match.group("sep") == "=" else _COLON_VALUE


def _mask_pairs(text: str) -> str:
    quoted = _mask_values(text, _QUOTED_NAME, lambda _m: _QUOTED_VALUE)
    return _mask_values(quoted, _UNQUOTED_NAME, _unquoted_value)


def _secret_values(environ: Mapping[str, str]) -> list[str]:
    values = {v for k, v in environ.items() if is_secret_name(k) and v and len(v) >= _MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def _all_forms(values: list[str]) -> list[str]:
    """Every form of every value, longest first (so a value is masked before a shorter one inside it)."""
    return sorted({f for v in values for f in _forms(v)}, key=len, reverse=True)


def _forms(value: str) -> set[str]:
    """A value as it appears raw, URL-encoded and JSON-escaped."""
    return {value, quote(value, safe=""), quote(value, safe="/"), json.dumps(value)[1:-1]}


def _mask_userinfo(text: str) -> str:
    """Mask the user part of ``scheme://user:password@host`` (all of it up to the last "@" before the host, so a
    password may hold "/" or "@") and a bare user part of 16 or more token characters; in one pass over the
    text, so that no input can make it slow. Over-masking is the safe side: any scheme-like run before "://"
    counts."""
    if "://" not in text:
        return text
    out: list[str] = []
    done = 0  # text[:done] is in out
    token_end = at = -1  # the URL token the last "://" was in, and its last "@" before a host
    colon = sign = -1  # the next ":" and "@" at or after the current start (positions only move forward)
    i = text.find("://")
    while i != -1:
        start = i + 3
        if i == 0 or not _SCHEME_CHAR.match(text, i - 1) or start < done:
            i = text.find("://", start)
            continue
        if start > token_end:  # a new URL token: its end and its last "@" before a host, found once
            m = _URL_TOKEN_END.search(text, start)
            token_end = m.start() if m else len(text)
            at = text.rfind("@", start, token_end)
            while at != -1 and not _HOST_START.match(text, at + 1):
                at = text.rfind("@", start, at)
        if colon < start:
            colon = text.find(":", start, token_end)
            colon = token_end if colon == -1 else colon
        if sign < start:
            sign = text.find("@", start, token_end)
            sign = token_end if sign == -1 else sign
        end = -1
        if at > start and colon < at and colon < sign:  # user:password@host, no "@" before the first ":"
            end = at
        elif bare := _BARE_USER.match(text, start):
            end = bare.end() - 1
        if end != -1:
            out += [text[done:start], MASK]
            done = end
        i = text.find("://", max(start, end))
    return "".join(out) + text[done:]


def redact(text: str, environ: Mapping[str, str] | None = None, extra: list[str] | None = None) -> str:
    """``text`` with secret values and token shapes replaced by MASK."""
    env = os.environ if environ is None else environ
    values = [*(s for s in extra or () if s and len(s) >= _MIN_SECRET_LEN), *_secret_values(env)]
    return _redact(text, _all_forms(values))


def _redact(text: str, forms: list[str]) -> str:
    """``redact`` with the secret values' forms found once (longest first)."""
    for value in forms:
        if value in text:
            text = text.replace(value, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    text = _mask_userinfo(text)
    for pattern, replacement in _PAIR_PATTERNS:
        text = pattern.sub(replacement, text)
    return _mask_pairs(text)


def redact_obj(obj: Any, environ: Mapping[str, str] | None = None) -> Any:
    """A JSON-like value with every string (keys too) redacted; the structure is kept, so it stays valid."""
    env = os.environ if environ is None else environ
    # the environment's secret values are looked up once per document, not once per string
    return _redact_obj(obj, _all_forms(_secret_values(env)))


def _redact_obj(obj: Any, forms: list[str]) -> Any:
    if isinstance(obj, str):
        return _redact(obj, forms)
    if isinstance(obj, Mapping):
        return {(_redact(k, forms) if isinstance(k, str) else k): _redact_obj(v, forms) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_redact_obj(v, forms) for v in obj]
    return obj


def redact_fields(obj: T, environ: Mapping[str, str] | None = None) -> T:
    """A dataclass (and the dataclasses, tuples, lists and dicts in it) with every string redacted, its types kept:
    for a result that several outputs render. Redacting each rendered text is not enough, because rendering can
    hide a secret's shape: a JSON string quoted in a log line, escaped again in a JSON report, is ``\\\"``-deep."""
    env = os.environ if environ is None else environ
    return cast(T, _redact_fields(obj, _all_forms(_secret_values(env))))


def _redact_fields(obj: Any, forms: list[str]) -> Any:
    if isinstance(obj, enum.Enum):  # a str enum (an outcome) is a value of its type, never text to redact
        return obj
    if isinstance(obj, str):
        return _redact(obj, forms)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: _redact_fields(getattr(obj, f.name), forms) for f in dataclasses.fields(obj) if f.init}
        return dataclasses.replace(obj, **changes)
    if isinstance(obj, Mapping):
        return {(_redact(k, forms) if isinstance(k, str) else k): _redact_fields(v, forms) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [_redact_fields(v, forms) for v in obj]
        return tuple(items) if isinstance(obj, tuple) else items
    return obj


def redact_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment with secret-named variables masked and the rest redacted."""
    env = os.environ if environ is None else environ
    return {k: (MASK if is_secret_name(k) and v else redact(v, env)) for k, v in sorted(env.items())}


class RedactingStream:
    """A text stream that redacts each write (the CLI wraps stdout and stderr in it)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding...
        return getattr(self._stream, name)
