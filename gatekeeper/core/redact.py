"""Keep secrets out of logs, artifacts, reports and exception messages.

Two layers: values of variables whose names say they are secret are replaced
wherever they appear, and well-known token shapes (Slack webhooks and tokens,
GitLab tokens, bearer headers, credentials in URLs) are masked by pattern.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["MASK", "is_secret_name", "redact", "redact_env"]

MASK = "[REDACTED]"

_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|WEBHOOK|API_KEY|PRIVATE|CREDENTIAL|_KEY$|^KEY$|AUTH", re.I)

_PATTERNS = [
    re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]+"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{8,}"),
    re.compile(r"\bxapp-[A-Za-z0-9-]{8,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bgl(?:cbt|dt|ptt|ft|rt|soat|imt|agent)-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    re.compile(r"(?i)(authorization:\s*(?:bearer|token|basic)\s+)[^\s'\"]+"),
    re.compile(r"(?i)((?:private|job)-token:\s*)[^\s'\"]+"),
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@'\"]+:)[^\s@/'\"]+(@)"),
]

_MIN_SECRET_LEN = 6  # shorter values ("1", "true") would mask half a log


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def _secret_values(environ: Mapping[str, str]) -> list[str]:
    values = {v for k, v in environ.items() if is_secret_name(k) and v and len(v) >= _MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def redact(text: str, environ: Mapping[str, str] | None = None, extra: list[str] | None = None) -> str:
    """``text`` with secret values and token shapes replaced by MASK."""
    env = os.environ if environ is None else environ
    for value in [*(s for s in extra or () if s and len(s) >= _MIN_SECRET_LEN), *_secret_values(env)]:
        text = text.replace(value, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(
            lambda m: (m.group(1) + MASK + (m.group(2) if m.lastindex == 2 else "")) if m.lastindex else MASK, text
        )
    return text


def redact_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment with secret-named variables masked and the rest redacted."""
    env = os.environ if environ is None else environ
    return {k: (MASK if is_secret_name(k) and v else redact(v, env)) for k, v in sorted(env.items())}
