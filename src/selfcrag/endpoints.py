"""Where a model or an embeddings server is, and which key it gets: read from the operator's environment
(OPENAI_API_KEY, OPENAI_BASE_URL, SELFCRAG_API_KEY). Below both reasoners and the index, because the embedders,
the calibration's choice of backend and the chat models all ask it (changed: out of llm/models.py).
"""

from __future__ import annotations

import os


def model_configured() -> bool:
    """A model is reachable without further setup: the `auto` backend then uses it."""
    return any(os.environ.get(name) for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SELFCRAG_BASE_URL"))


OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
NO_KEY = "not-needed"  # local OpenAI-compatible servers need no key, but the client insists on one


def configured_endpoint() -> str:
    """Where the operator configured OPENAI_API_KEY to go: OPENAI_BASE_URL (OPENAI_API_BASE, its older name,
    which langchain-openai still reads), else OpenAI."""
    return os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or OPENAI_DEFAULT_URL


def api_key_for(url: str | None) -> str | None:
    """The key to send to `url` (None: the configured endpoint). OPENAI_API_KEY goes only to the endpoint it was
    configured with; any other server (a run's `base_url`) gets SELFCRAG_API_KEY when the operator set one, else
    a dummy, so a run cannot send the operator's key to a server of its choosing. None: no key is configured
    for the configured endpoint."""
    if url is None or _same_endpoint(url, configured_endpoint()):
        key = os.environ.get("OPENAI_API_KEY")
        return key or (NO_KEY if url is not None else None)
    return os.environ.get("SELFCRAG_API_KEY") or NO_KEY


def _same_endpoint(a: str, b: str) -> bool:
    return a.strip().rstrip("/").lower() == b.strip().rstrip("/").lower()
