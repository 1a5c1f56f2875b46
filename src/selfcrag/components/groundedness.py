"""Self-RAG's groundedness check, offline: is each answer sentence supported by the evidence strips?

A sentence is supported when it is (nearly) copied from the evidence, or when its closest evidence sentence
is both semantically similar and shares most of its content words. The rule checks (numbers, names,
absolute words) then catch the small edits embeddings do not see, such as "30 days" -> "45 days".
When the embedder cannot read the answer's language (Chinese for MiniLM), word overlap alone decides.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from selfcrag.components.base import Embedder, GroundednessCheck, Strip
from selfcrag.components.embeddings import for_run, reads
from selfcrag.components.offline_grading import embed, fold, strip_citations, terms_of
from selfcrag.components.text import split_sentences, words
from selfcrag.language import CJK
from selfcrag.quality.rules import rule_flags

if TYPE_CHECKING:
    from selfcrag.context import Context

# Tuned on HaluEval QA (right vs hallucinated answers) and hand-written faithful paraphrases of the sample KB.
VERBATIM_OVERLAP = 0.9  # this share of a sentence's content words found in one evidence sentence: copied
SUPPORT_BAR = 0.75  # similarity-and-overlap score from which a paraphrased sentence counts as supported
SIM_WEIGHT = 0.5  # weight of the cosine similarity in that score; the rest is lexical overlap
MAX_NOVEL_SHARE = 0.34  # paraphrases add at most ~1 word in 3 that the evidence never uses; inventions add more
NEGATION_OVERLAP = 0.5  # a polarity flip only counts against an evidence sentence about the same thing
FLAG_PENALTY = 0.25  # per rule finding: one wrong number should sink an otherwise supported answer


# "no matter", "no later than" are idioms, not negations.
_NEGATION = re.compile(
    r"\b(?:not|no(?! matter| later| longer than| more than)|never|cannot|none|nothing|without)\b|n't\b", re.I
)
# Chinese negators, except inside words that negate nothing: 不同 (different), 不过 (but), 无论 (no matter) ...
_NEGATION_ZH = re.compile("不(?![同过少久仅论管断但错如足])|没|无(?!论)|未|非(?!常)|别|勿")


_GLUED = re.compile(r"(?<=[a-z)\"])\.(?=[A-Z])")  # "player.Mary": scraped text often loses the space


def evidence_sentences(text: str) -> list[str]:
    """The sentences of one evidence text, as the check compares them (an index stores their vectors)."""
    return split_sentences(_GLUED.sub(". ", text))


def _normalised(text: str) -> str:
    """Lower-case letters, digits and Chinese characters only: a copied sentence still matches after punctuation,
    case or full-width changes."""
    return " " + " ".join(re.findall(f"[a-z0-9]+|[{CJK}]", fold(text).lower())) + " "


def _negated(text: str) -> bool:
    return bool(_NEGATION.search(text) or _NEGATION_ZH.search(text))


def _supported(sentence: str, own: set[str], sims: np.ndarray | None, evidence: list[str],
               evidence_words: list[set[str]], all_words: set[str]) -> bool:
    """A sentence that is not copied: supported if it paraphrases the evidence without adding to it. Without
    similarities (`sims` None: the embedder cannot read the text) the closest sentence is the one sharing the
    most words, and the overlap stands in for the similarity."""
    overlaps = [len(own & words_) / len(own) for words_ in evidence_words]
    best = int(np.argmax(sims)) if sims is not None else int(np.argmax(overlaps))
    # Overlap with the closest sentence, and with the evidence as a whole (answers may combine two).
    local = overlaps[best]
    overall = len(own & all_words) / len(own)
    if local >= NEGATION_OVERLAP and _negated(sentence) != _negated(evidence[best]):
        return False  # "can be returned" vs "cannot be returned": same words, opposite claim
    if 1 - overall > MAX_NOVEL_SHARE:
        return False  # too much the evidence never says
    if local >= VERBATIM_OVERLAP:
        return True
    similarity = float(sims[best]) if sims is not None else max(local, overall)
    return SIM_WEIGHT * similarity + (1 - SIM_WEIGHT) * max(local, overall) >= SUPPORT_BAR


class OfflineGroundednessChecker:
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def check(self, answer: str, strips: list[Strip], settings: Context) -> GroundednessCheck:
        sentences = [strip_citations(s) for s in split_sentences(strip_citations(answer))]
        sentences = [s for s in sentences if words(s)]
        if not sentences:
            return GroundednessCheck(score=0.0, grounded=False)
        texts = [_GLUED.sub(". ", s["text"]) for s in strips]
        evidence_text = "\n".join(texts)
        evidence = [e for s in strips for e in evidence_sentences(s["text"])]
        if not evidence:
            return GroundednessCheck(score=0.0, grounded=False, unsupported=sentences, flags=rule_flags(answer, ""))

        whole = _normalised(evidence_text)
        embedder = for_run(self.embedder, settings)
        vectors = embed(embedder, [*sentences, *evidence])
        sims = vectors[: len(sentences)] @ vectors[len(sentences) :].T
        evidence_words = [terms_of(e) for e in evidence]
        all_words = set().union(*evidence_words)

        unsupported: list[str] = []
        flags: list[str] = []
        for i, sentence in enumerate(sentences):
            own = terms_of(sentence)
            sentence_flags = rule_flags(sentence, evidence_text)
            flags.extend(f for f in sentence_flags if f not in flags)
            if sentence_flags:  # a wrong number or an invented name: the sentence is not supported as a whole
                unsupported.append(sentence)
                continue
            if not own or _normalised(sentence) in whole:
                continue  # copied from the evidence (or no content to check)
            similar = sims[i] if reads(embedder, sentence) else None
            if not _supported(sentence, own, similar, evidence, evidence_words, all_words):
                unsupported.append(sentence)

        supported_share = 1 - len(unsupported) / len(sentences)
        score = min(1.0, max(0.0, supported_share - FLAG_PENALTY * len(flags)))
        return GroundednessCheck(score=round(score, 4), grounded=score >= settings.thresholds().groundedness,
                                 unsupported=unsupported, flags=flags)
