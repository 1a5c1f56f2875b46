"""Query rewriting without a model: keyword expansion for the knowledge base, a keyword query for the web, and
a follow-up question made standalone (`contextualize`, offline/contextualize.py).

A new retrieval round is only worth it if it can find something new, so the knowledge-base query adds
terms the last query did not have: distinctive words of the best evidence so far (pseudo-relevance
feedback), the terms the answer grader said were missing, and the name the best evidence gives that the
question does not (the bridge of a multi-hop question: "the woman who portrayed X" -> the actress the first
hop's passage names), so the next round can retrieve the second hop.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from selfcrag.contract import Embedder, Rewrite, Strip, Turn
from selfcrag.language import language_of
from selfcrag.offline.contextualize import carry_subject
from selfcrag.prompts import messages
from selfcrag.text.rules import names
from selfcrag.text.terms import join_pairs, question_terms
from selfcrag.text.text import QUESTION_WORDS, STOPWORDS, split_sentences, term, words

if TYPE_CHECKING:
    from selfcrag.context import Context

EVIDENCE_TERMS = 3  # expansion terms taken from the evidence: enough to shift BM25, few enough not to drift
EVIDENCE_STRIPS = 2  # only the best strips: lower ones are more likely off-topic
BRIDGE_NAMES = 1  # names carried from the best strip: one bridge per hop; more would pull toward the first hop
WEB_MAX_WORDS = 8
# Words of the graders' own messages ("no passage mentions: x", "回答没有提到：y") are not query terms.
_FEEDBACK_VOCABULARY = frozenset({
    "passage", "passages", "mention", "mentions", "answer", "answers", "evidence", "number", "date", "time",
    "name", "person", "organisation", "place", "reason", "statement", "missing", "support", "yes",
}) | frozenset(words(messages.vocabulary()))
_NAMED = re.compile(r"(?:mentions?:|提到：)\s*([^;；]+)")


def _keywords(text: str) -> list[str]:
    """Content words in order, unstemmed (queries read better), one per stem; bare numbers are no keywords.
    Chinese comes back as the runs its pairs were cut from (银行卡, not 银行 行卡); BM25 cuts them again."""
    out: dict[str, str] = {}
    kept = [w for w in words(text) if w not in STOPWORDS and w not in QUESTION_WORDS and any(c.isalpha() for c in w)]
    for w in join_pairs(kept):
        if len(w) > 1:
            out.setdefault(term(w), w)
    return list(out.values())


def _keys(phrase: str) -> set[str]:
    return {term(w) for w in words(phrase)}


def _bridges(evidence: list[Strip], have: set[str]) -> list[str]:
    """Names in the best strip that the query lacks, several-word names first (more likely one entity than a
    capitalised adjective), then in reading order."""
    best = max(evidence, key=lambda s: s["score"], default=None)
    if best is None:
        return []
    found = [n for sentence in split_sentences(best["text"]) for n in names(sentence) if _keys(n) - have]
    found = [n for n in dict.fromkeys(found) if not _keys(n) & _keys(best["title"])]  # the first hop's own name
    return sorted(found, key=lambda n: len(n.split()) < 2)[:BRIDGE_NAMES]


def _feedback_terms(feedback: str) -> list[str]:
    named = _NAMED.findall(feedback)
    text = " ".join(named) if named else feedback
    return [w for w in _keywords(text) if w not in _FEEDBACK_VOCABULARY]


class KeywordRewriter:
    """`embedder` is accepted for a uniform constructor with the other offline components; it is not needed."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.embedder = embedder

    def rewrite(
        self, question: str, query: str, evidence: list[Strip], feedback: str, for_web: bool, settings: Context
    ) -> Rewrite:
        base = join_pairs(list(question_terms(question).values()))
        if for_web and language_of(question) == "zh":
            # Web search engines segment Chinese themselves; character pairs would only confuse them.
            return Rewrite(query=question.strip(), reason="the question as asked, for web search")
        if for_web:
            # Identifiers and numbers first: they are what a web page must contain.
            ranked = sorted(base, key=lambda w: not any(c.isdigit() for c in w))
            keep = set(ranked[:WEB_MAX_WORDS])
            web_query = " ".join(w for w in base if w in keep)
            return Rewrite(query=web_query or question.strip(), reason="keyword query for web search")

        have = _keys(query) | _keys(" ".join(base))
        from_feedback = [w for w in _feedback_terms(feedback) if _keys(w) - have]
        have |= _keys(" ".join(from_feedback))
        bridges = _bridges(evidence, have) if language_of(question) == "en" else []
        have |= _keys(" ".join(bridges))
        counts: Counter[str] = Counter()
        best = sorted(evidence, key=lambda s: -s["score"])[:EVIDENCE_STRIPS]
        for strip in best:
            for w in _keywords(strip["text"]):
                # Chinese runs of the evidence are phrases, not keywords: BM25 already has their pairs.
                if _keys(w) - have and len(w) > 2 and w.isascii():
                    counts[w] += 1
        # Frequent in the best strips first; ties in reading order (Counter keeps insertion order).
        from_evidence = [w for w, _ in counts.most_common(EVIDENCE_TERMS)]
        new_query = " ".join(dict.fromkeys([*base, *from_feedback, *bridges, *from_evidence]))
        added = [*from_feedback, *bridges, *from_evidence]
        if not new_query or new_query.lower() == " ".join(query.lower().split()):
            return Rewrite(query=query, reason="nothing new to add to the query")
        reason = "keywords of the question"
        if from_feedback:
            reason += f", plus missing terms: {', '.join(from_feedback)}"
        if bridges:
            reason += f", plus the name the evidence gives: {', '.join(bridges)}"
        if from_evidence:
            reason += f", plus evidence terms: {', '.join(from_evidence)}"
        if not added:
            reason += " (no new terms found)"
        return Rewrite(query=new_query, reason=reason, bridges=bridges)

    def contextualize(self, question: str, history: list[Turn], settings: Context) -> Rewrite:
        """A follow-up made standalone: the earlier turns' subject terms carried in (offline/contextualize.py)."""
        return carry_subject(question, history)
