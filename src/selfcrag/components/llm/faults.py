"""What a failing model call does. Transient faults (timeouts, connection errors, 429, 5xx) propagate while the
node has attempts left, so the node's `RetryPolicy` runs it again; any other fault, and a transient one on the
last attempt, degrades the step in its configured direction instead. A model fault never ends a run."""

from __future__ import annotations

from langgraph.types import RetryPolicy

MODEL_ATTEMPTS = 3
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
    return getattr(exc, "status_code", None) in _TRANSIENT_STATUS


# On every node that calls a model. No jitter: one agent run has no thundering herd to spread out.
MODEL_RETRY = RetryPolicy(
    max_attempts=MODEL_ATTEMPTS, initial_interval=0.5, backoff_factor=2.0, jitter=False, retry_on=is_transient
)


def attempt() -> int:
    """The current node's attempt (1-based); 1 outside a graph run."""
    try:
        from langgraph.runtime import get_runtime

        info = getattr(get_runtime(), "execution_info", None)
    except (RuntimeError, KeyError, TypeError):  # not inside a node (a component called directly)
        return 1
    return getattr(info, "node_attempt", 1) or 1


def raise_if_retrying(exc: Exception) -> None:
    """Let a transient fault reach the node's RetryPolicy while attempts remain."""
    if is_transient(exc) and attempt() < MODEL_ATTEMPTS:
        raise exc


def describe(exc: BaseException) -> str:
    """One short line for the trace: the exception type and the start of its message."""
    message = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {message[:200]}" if message else type(exc).__name__
    if is_transient(exc) and attempt() > 1:
        text += f" (attempt {attempt()}/{MODEL_ATTEMPTS})"
    return text


class ModelConfigError(ValueError):
    """The model settings cannot work (no key or server, unknown provider): a setup error, raised, not degraded."""
