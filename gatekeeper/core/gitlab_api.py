"""The GitLab REST API: one requests session with timeouts, retries and token redaction.

Everything gatekeeper sends to or reads from GitLab (MR notes, commit statuses,
the GitLab baseline store) goes through ``GitLabClient``: connect and read
timeouts on every call, retries with backoff on 429 (honouring Retry-After),
5xx and connection errors, and error messages that never contain the token.

CI_JOB_TOKEN cannot create notes or commit statuses, so writes need a project
access token with ``api`` scope in GATEKEEPER_GITLAB_TOKEN (a masked variable),
sent as the PRIVATE-TOKEN header. Reads of artifacts can use CI_JOB_TOKEN
(``token_header="JOB-TOKEN"``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests

from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.core.redact import redact

__all__ = ["TOKEN_VARIABLE", "GitLabClient", "GitLabError", "client_from_env"]

TOKEN_VARIABLE = "GATEKEEPER_GITLAB_TOKEN"  # noqa: S105 - the name of the variable, not a token  # nosec B105
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 60.0  # a Retry-After beyond this is not worth holding a CI job for


class GitLabError(Exception):
    """A GitLab call failed for good (after retries); the message is redacted."""

    def __init__(self, message: str, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


@dataclass
class GitLabClient:
    api_url: str  # e.g. https://gitlab.example.com/api/v4 (CI_API_V4_URL)
    token: str
    timeout: tuple[float, float] = (5.0, 20.0)  # (connect, read) seconds
    retries: int = 3
    backoff_s: float = 1.0
    session: requests.Session | None = None
    sleep: Callable[[float], None] = time.sleep
    token_header: str = "PRIVATE-TOKEN"  # noqa: S105 - a header name; or JOB-TOKEN (CI_JOB_TOKEN: reads only)

    def __post_init__(self) -> None:
        self.api_url = self.api_url.rstrip("/")
        if self.session is None:
            self.session = requests.Session()
        if self.token:
            self.session.headers[self.token_header] = self.token
        self.session.headers["User-Agent"] = "gatekeeper"

    def project_path(self, project: str | int) -> str:
        """``/projects/<id>``; a path like ``group/repo`` is URL-encoded as GitLab wants."""
        return f"/projects/{quote(str(project), safe='')}"

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        retries: int | None = None,
    ) -> Any:
        """JSON body of a successful call; GitLabError after the last retry (``retries`` overrides the client's)."""
        resp = self._send(method, path, json=json, params=params, retries=retries)
        try:  # the strict reader: an answer nested 5,000 deep was exit 70 (RecursionError), a duplicate key a decoy
            return files.parse_json(resp.content, f"GitLab {path}", what="GitLab answer") if resp.content else None
        except InputError:
            raise GitLabError(
                self._redact(f"GitLab {method} {path} failed: HTTP {resp.status_code} but not JSON: {resp.text[:200]}"),
                resp.status_code,
            ) from None

    def get_bytes(self, path: str, *, params: Mapping[str, Any] | None = None) -> bytes | None:
        """The raw body of a GET (an artifact file or archive); None on 404; GitLabError otherwise."""
        try:
            return self._send("GET", path, params=params).content
        except GitLabError as err:
            if err.status == 404:
                return None
            raise

    def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        retries: int | None = None,
    ) -> Any:
        """The successful response, with retries on 429, 5xx and connection errors."""
        assert self.session is not None  # narrows the type: set in __post_init__  # nosec B101
        url = f"{self.api_url}{path}"
        last = ""
        status: int | None = None
        retries = self.retries if retries is None else retries
        for attempt in range(retries + 1):
            wait = self.backoff_s * (2**attempt)
            try:
                resp = self.session.request(method, url, json=json, params=params, timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as err:
                last, status = f"{type(err).__name__}: {err}", None
            except requests.RequestException as err:  # a bad URL and the like: retrying cannot help
                last, status = f"{type(err).__name__}: {err}", None
                break
            else:
                status = resp.status_code
                if resp.ok:
                    return resp
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code not in RETRY_STATUSES:
                    break
                wait = _retry_after(resp.headers.get("Retry-After"), wait)
            if attempt < retries:
                self.sleep(wait)
        raise GitLabError(self._redact(f"GitLab {method} {path} failed: {last}"), status)

    def paged(self, path: str, *, params: Mapping[str, Any] | None = None, max_pages: int = 20) -> list[Any]:
        """All items of a paginated list (bounded: a runaway list must not hold the job)."""
        items: list[Any] = []
        for page in range(1, max_pages + 1):
            batch = self.request("GET", path, params={**(params or {}), "per_page": 100, "page": page})
            if not batch:
                break
            items.extend(batch)
            if len(batch) < 100:
                break
        return items

    def _redact(self, text: str) -> str:
        return redact(text, extra=[self.token] if self.token else None)


def _retry_after(header: str | None, default: float) -> float:
    if header is None:
        return default
    try:
        wait = float(header)
    except ValueError:  # an HTTP date, or garbage
        return default
    # "nan" and "inf" parse as floats; time.sleep(nan) raises, and inf would hold the job
    return min(max(wait, 0.0), MAX_RETRY_AFTER_S) if math.isfinite(wait) else default


def client_from_env(environ: Mapping[str, str] | None = None, **kwargs: Any) -> GitLabClient | None:
    """A client from CI_API_V4_URL and GATEKEEPER_GITLAB_TOKEN; None when either is missing."""
    env = os.environ if environ is None else environ
    api_url = env.get("CI_API_V4_URL")
    token = env.get(TOKEN_VARIABLE)
    if not api_url or not token:
        return None
    return GitLabClient(api_url=api_url, token=token, **kwargs)


def no_client_line(command: str, what: str) -> str:
    """What a command logs when ``client_from_env`` gave no client: ``what`` it did not write, and the fix."""
    return (
        f"gatekeeper: {command}: {TOKEN_VARIABLE} or CI_API_V4_URL not set: no {what} "
        "(CI_JOB_TOKEN cannot write them; add a project access token with api scope as a masked variable)"
    )
