"""A decline the model itself doubts is not taken: scored from the first token's probabilities, where the server
returns them (OpenAI and llama.cpp's server do, with `logprobs`); and how sure the model was of the whole reply
(`token_probability`, a feature of the draft's score).

A small model's "INSUFFICIENT: ..." is a coin toss: on evidence that states the answer, a 0.5B model put 0.36 of
its first-token probability on declining and 0.64 on the words of an answer, and sampling at temperature 0 took
the decline. When less than half of the first token's probability goes to the decline markers (INSUFFICIENT,
Missing), the generator asks once more with those first tokens banned (`logit_bias`, by the token ids the server
reported), and the answer it then writes goes to the checks like any other. A decline the model is sure of, or one
from a server without logprobs or token ids, is taken as it is.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from selfcrag.llm.models import copied

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

DECLINE_WORDS = ("insufficient", "missing")  # the generator prompt's two ways of saying it cannot answer
DOUBTED_BELOW = 0.5  # a decline holding less than this share of the first token's probability is doubted
TOP_TOKENS = 8  # alternatives asked for at each position: enough to hold the usual spellings of the markers
BAN = -100  # logit_bias that removes a token (OpenAI's and llama.cpp's scale)


def with_probabilities(model: BaseChatModel) -> BaseChatModel:
    """A copy of `model` that asks for the top token probabilities, when its class has the fields for that."""
    fields = getattr(type(model), "model_fields", {})
    if "logprobs" not in fields or "top_logprobs" not in fields:
        return model
    return copied(model, logprobs=True, top_logprobs=TOP_TOKENS)


def first_token_options(message: Any) -> list[tuple[str, float, int | None]]:
    """The first token's top alternatives the server reported, as (token, probability, token id or None); empty when
    the reply carries no probabilities."""
    logprobs = (getattr(message, "response_metadata", None) or {}).get("logprobs") or {}
    content = logprobs.get("content") or []
    options = (content[0].get("top_logprobs") or []) if content else []
    return [(str(o.get("token", "")), math.exp(float(o.get("logprob", -math.inf))),
             o["id"] if isinstance(o.get("id"), int) else None) for o in options]  # fmt: skip


def token_probability(message: Any) -> float | None:
    """The geometric mean of the reply's token probabilities (exp of their mean log-probability): how sure the model
    was of what it wrote; None when the reply carries no probabilities."""
    logprobs = (getattr(message, "response_metadata", None) or {}).get("logprobs") or {}
    found = [float(t["logprob"]) for t in logprobs.get("content") or []
             if isinstance(t, dict) and isinstance(t.get("logprob"), int | float) and math.isfinite(t["logprob"])]
    return round(math.exp(sum(found) / len(found)), 4) if found else None


def doubted_decline(message: Any) -> dict[int, int] | None:
    """The logit_bias that bans a doubted decline's first tokens; None when the decline stands (no probabilities,
    no token ids, or the model put at least DOUBTED_BELOW of its first token on declining)."""
    share, ids = 0.0, []
    for token, probability, token_id in first_token_options(message):
        word = token.strip().lower()
        if len(word) >= 2 and any(marker.startswith(word) for marker in DECLINE_WORDS):
            share += probability
            if token_id is not None:
                ids.append(token_id)
    if share >= DOUBTED_BELOW or not ids:
        return None
    return dict.fromkeys(ids, BAN)


def banning(model: BaseChatModel, bias: dict[int, int]) -> BaseChatModel:
    """A copy of `model` that cannot start with the banned tokens."""
    if "logit_bias" not in getattr(type(model), "model_fields", {}):
        return model
    return copied(model, logit_bias=bias)
