"""Multi-turn consistency: does the new answer contradict what the assistant said earlier in the thread?

Earlier "refunds are not supported", now "refunds are accepted within 7 days": each answer may be grounded in
its own evidence, yet the user now holds two claims that cannot both be true. Two sentences about the same
thing (they share most of the shorter one's content words) contradict when exactly one of them is negated,
or when they give different numbers for the same unit ("30 days" / "15 days").
"""

from __future__ import annotations

import re

from selfcrag.components.offline_grading import strip_citations, terms_of
from selfcrag.components.text import split_sentences

SAME_TOPIC = 0.5  # share of the shorter sentence's content words the two must share to be about one thing

_NEGATION = re.compile(r"\b(?:not|no|never|cannot|none|nothing|neither|nor)\b|n't\b", re.I)
_QUANTITY = re.compile(r"(\d+(?:[.,]\d+)?)\s*(%|[a-z]+)", re.I)


def _quantities(sentence: str) -> dict[str, set[str]]:
    """Numbers by the word that follows them: {"days": {"30"}, "%": {"5"}}."""
    found: dict[str, set[str]] = {}
    for value, unit in _QUANTITY.findall(sentence):
        found.setdefault(unit.lower().rstrip("s"), set()).add(value.replace(",", ""))
    return found


def _conflict(earlier: str, now: str) -> str:
    """Why two sentences contradict, or "" when they do not."""
    a, b = terms_of(earlier), terms_of(now)
    shorter = min(len(a), len(b))
    if not shorter or len(a & b) / shorter < SAME_TOPIC:
        return ""
    if bool(_NEGATION.search(earlier)) != bool(_NEGATION.search(now)):
        return "one says no where the other says yes"
    qa, qb = _quantities(earlier), _quantities(now)
    for unit in qa.keys() & qb.keys():
        if not qa[unit] & qb[unit]:
            return f"different numbers of {unit}s: {', '.join(sorted(qa[unit]))} vs {', '.join(sorted(qb[unit]))}"
    return ""


def contradictions(answer: str, earlier_answers: list[str]) -> list[dict[str, str]]:
    """Pairs of (earlier sentence, new sentence) that cannot both be true, with the reason."""
    found: list[dict[str, str]] = []
    new_sentences = split_sentences(strip_citations(answer))
    for earlier in earlier_answers:
        for old in split_sentences(strip_citations(earlier)):
            for new in new_sentences:
                if why := _conflict(old, new):
                    found.append({"earlier": old, "now": new, "why": why})
    return found
