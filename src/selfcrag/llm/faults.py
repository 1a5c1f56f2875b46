"""What a failing model call is: transient (worth another try), how long the server asked us to wait, and one
short line for the trace. `calls.py` acts on it: it retries transient faults within the call's deadline and the
run's budget; any other fault, and a transient one it cannot retry, degrades the step in its configured
direction. A model fault never ends a run."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Any

from selfcrag.errors import ReplayedFault
from selfcrag.text.redaction import redact

_TRANSIENT_STATUS = {408, 409, 429, 500, 502, 503, 504}


def is_transient(exc: BaseException) -> bool:
    """Worth another try: the same request may succeed in a moment."""
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    try:
        import httpx
        import openai
    except ImportError:  # pragma: no cover - both come with langchain-openai
        return False
    if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):  # includes APITimeoutError
        return True
    # openai.APIStatusError and most other providers' HTTP errors carry the status.
    return status_of(exc) in _TRANSIENT_STATUS


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def retry_after(exc: BaseException, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait (`Retry-After`: seconds or an HTTP date; `retry-after-ms`, which OpenAI
    sends), or None when it did not say. The headers are read from the exception's HTTP response, which the openai
    client and most httpx-based providers attach."""
    headers: Any = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None or not hasattr(headers, "get"):
        return None
    if (millis := _number(headers.get("retry-after-ms"))) is not None:
        return max(0.0, millis / 1000)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    if (seconds := _number(raw)) is not None:
        return max(0.0, seconds)
    try:
        when = parsedate_to_datetime(str(raw))
    except (TypeError, ValueError, IndexError):  # neither form: as if the server had not said
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; a malformed one without a zone is read as such
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _number(raw: Any) -> float | None:
    try:
        value = float(str(raw).strip())
    except (TypeError, ValueError):
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None  # no NaN, no inf


def describe(exc: BaseException) -> str:
    """One short line for the trace: the exception type and the start of its message, redacted of anything
    key-shaped (a 401 body may echo the key it was sent)."""
    if isinstance(exc, ReplayedFault):  # the line the recorded fault had
        return exc.described
    message = redact(" ".join(str(exc)[:400].split()))  # a server may put a whole (huge) body in its error
    return f"{type(exc).__name__}: {message[:200]}" if message else type(exc).__name__


