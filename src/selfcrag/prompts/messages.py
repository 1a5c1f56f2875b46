"""User-facing messages written without a model: abstentions and caveats."""

from __future__ import annotations

VERSION = "messages/1"


def abstain(missing: str) -> str:
    text = "I don't know: the available evidence does not answer this question."
    return f"{text} Missing: {missing.rstrip('.')}." if missing else text


def caveat(reasons: list[str]) -> str:
    return "Caveat: this answer may be incomplete or only partly supported (" + "; ".join(reasons) + ")."
