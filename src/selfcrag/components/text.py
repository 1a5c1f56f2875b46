"""Text helpers shared by retrieval (BM25), the offline graders and the rule checks.

Words are lower-cased; identifiers such as `user_123`, `E1042` or `v2.3` stay whole so keyword
retrieval can find them; numbers are normalised so "30", "30.0" and "thirty" compare equal.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Identifiers (user_123, E1042, v2.3, api-key) and plain words/numbers, all in one pass.
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[_.][A-Za-z0-9]+)*|[\u4e00-\u9fff]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|(?<=[。！？；])|\n{2,}|\n(?=\s*[-*#]|\s*\d+\.)")

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
    now of off on once only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves also may might
    must shall us per via within without whose de la le el s t d ll m o re ve y
    """.split()
)

# Question words say what kind of answer is expected; they are not content to match.
QUESTION_WORDS = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "many", "much"})

_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000,
}
_NUMBER = re.compile(r"(?<![A-Za-z_])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![A-Za-z_.\d])\d+(?:\.\d+)?(?![A-Za-z_]*\d)")


def words(text: str) -> list[str]:
    """Lower-cased tokens, identifiers kept whole, punctuation dropped."""
    return [t.lower() for t in _TOKEN.findall(text)]


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper: enough for 'returns'/'returned'/'returning' to meet, cheap and deterministic."""
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)] + keep
            if suffix == "s" and word.endswith("ss"):
                return word
            return base
    return word


def content_words(text: str) -> list[str]:
    """Stemmed tokens without stop words or question words: what a passage must cover."""
    return [stem(w) for w in words(text) if w not in STOPWORDS and w not in QUESTION_WORDS]


def keyword_tokens(text: str) -> list[str]:
    """Tokens for BM25: stemmed, stop words removed."""
    return [stem(w) for w in words(text) if w not in STOPWORDS]


_ABBREVIATION = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|vs|etc|No|Inc|Ltd|Co|Mt)|\b[A-Z]|e\.g|i\.e)\.$")


def split_sentences(text: str) -> list[str]:
    """Sentences (and list items / headings) in order, stripped, empty ones dropped."""
    sentences: list[str] = []
    for part in _SENTENCE_END.split(text.strip()):
        part = part.strip() if part else ""
        if not part:
            continue
        if sentences and _ABBREVIATION.search(sentences[-1]):  # "Dr." or "U.S." did not end a sentence
            sentences[-1] = f"{sentences[-1]} {part}"
        else:
            sentences.append(part)
    return sentences


def numbers(text: str) -> set[float]:
    """Numeric values in the text, digits and common number words alike ("thirty" == 30)."""
    values: set[float] = set()
    for match in _NUMBER.findall(text):
        try:
            values.add(float(match.replace(",", "")))
        except ValueError:
            continue
    for w in words(text):
        if w in _NUMBER_WORDS:
            values.add(float(_NUMBER_WORDS[w]))
    return values


def approx_tokens(text: str) -> int:
    """A cheap token count (whitespace words); budgets only need to be roughly right offline."""
    return len(text.split())
