"""Send a message to Slack with slack-sdk: an incoming webhook or a bot token + channel.

Retries go through slack-sdk's RetryHandlers: 429 honouring Retry-After
(capped), 5xx, and connection errors/timeouts, with exponential backoff.
slack-sdk logs request URLs (the webhook URL is the secret) on errors, so its
clients get a silenced logger; our own messages are redacted.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.client import RemoteDisconnected
from typing import Any
from urllib.error import URLError

from slack_sdk.http_retry import RetryHandler
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import BackoffRetryIntervalCalculator

from gatekeeper.core.redact import redact

__all__ = ["SlackSendError", "SlackTarget", "retry_handlers", "send"]

MAX_RETRY_AFTER_S = 60.0


class SlackSendError(Exception):
    """Sending failed for good (after retries); the message is redacted."""


@dataclass(frozen=True)
class SlackTarget:
    webhook_url: str | None = None
    token: str | None = None
    channel: str | None = None
    base_url: str | None = None  # Web API base (tests, Enterprise Grid proxies)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, channel: str | None = None) -> SlackTarget | None:
        env = os.environ if environ is None else environ
        webhook = env.get("SLACK_WEBHOOK_URL") or None
        token = env.get("SLACK_BOT_TOKEN") or None
        channel = channel or env.get("SLACK_CHANNEL") or None
        if webhook:
            return cls(webhook_url=webhook)
        if token and channel:
            return cls(token=token, channel=channel, base_url=env.get("SLACK_API_BASE_URL") or None)
        return None

    @property
    def secrets(self) -> list[str]:
        return [s for s in (self.webhook_url, self.token) if s]

    def describe(self) -> str:
        return "incoming webhook" if self.webhook_url else f"bot token, channel {self.channel}"


class _RateLimit(RateLimitErrorRetryHandler):
    """Honours Retry-After like slack-sdk's handler, but capped and with an injectable sleep."""

    def __init__(self, max_retry_count: int, sleep: Callable[[float], None]) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self._sleep = sleep

    def prepare_for_next_attempt(self, *, state: Any, request: Any, response: Any = None, error: Any = None) -> None:
        if response is None:
            raise error
        state.next_attempt_requested = True
        header = next((v for k, v in response.headers.items() if k.lower() == "retry-after"), None)
        try:
            wait = float(header[0] if isinstance(header, list) else header) if header is not None else 1.0
        except ValueError:
            wait = 1.0
        if not math.isfinite(wait):  # "nan" parses, and time.sleep(nan) raises
            wait = 1.0
        self._sleep(min(max(wait, 0.0), MAX_RETRY_AFTER_S))
        state.increment_current_attempt()


class _ServerErrors(ServerErrorRetryHandler):
    def _can_retry(self, *, state: Any, request: Any, response: Any = None, error: Any = None) -> bool:
        return response is not None and response.status_code in (500, 502, 503, 504)


def retry_handlers(
    retries: int = 3, backoff_s: float = 0.5, sleep: Callable[[float], None] = time.sleep
) -> list[RetryHandler]:
    interval = BackoffRetryIntervalCalculator(backoff_factor=backoff_s)
    return [
        _RateLimit(retries, sleep),
        _ServerErrors(max_retry_count=retries, interval_calculator=interval),
        ConnectionErrorRetryHandler(
            max_retry_count=retries,
            interval_calculator=interval,
            error_types=[URLError, ConnectionError, RemoteDisconnected, TimeoutError],
        ),
    ]


def _quiet_logger() -> logging.Logger:
    logger = logging.getLogger("gatekeeper.notify.slack_sdk")
    logger.setLevel(logging.CRITICAL + 1)
    logger.propagate = False
    return logger


def send(
    message: Mapping[str, Any],
    target: SlackTarget,
    *,
    timeout: float = 10.0,
    retries: int = 3,
    backoff_s: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Deliver ``message`` ({"text", "blocks"}); SlackSendError (redacted) when it cannot."""
    handlers = retry_handlers(retries, backoff_s, sleep)
    try:
        if target.webhook_url:
            from slack_sdk.webhook import WebhookClient

            client = WebhookClient(
                target.webhook_url, timeout=int(max(timeout, 1)), retry_handlers=handlers, logger=_quiet_logger()
            )
            client.timeout = timeout  # type: ignore[assignment]  # WebhookClient annotates int; urllib takes float
            resp = client.send_dict(dict(message))
            if resp.status_code != 200 or (resp.body or "").strip() != "ok":
                raise SlackSendError(redact(f"Slack webhook answered HTTP {resp.status_code}: {resp.body[:200]}"))
            return
        from slack_sdk import WebClient

        if not target.channel:
            raise SlackSendError(f"Slack ({target.describe()}): a bot token needs a channel (SLACK_CHANNEL)")
        kwargs: dict[str, Any] = {"base_url": target.base_url} if target.base_url else {}
        web = WebClient(
            token=target.token, timeout=int(max(timeout, 1)), retry_handlers=handlers, logger=_quiet_logger(), **kwargs
        )
        web.timeout = timeout  # type: ignore[assignment]  # WebClient annotates int; urllib takes float
        web.chat_postMessage(channel=target.channel, text=message.get("text", ""), blocks=message.get("blocks"))
    except SlackSendError:
        raise
    except Exception as err:  # slack-sdk raises URLError, TimeoutError, SlackApiError...: all mean "not sent"
        raise SlackSendError(
            redact(f"Slack ({target.describe()}): {type(err).__name__}: {err}", extra=target.secrets)
        ) from None
