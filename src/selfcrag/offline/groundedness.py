"""Self-RAG's groundedness check, offline: is each answer sentence supported by the evidence strips?

A sentence is supported when it is (nearly) copied from the evidence, or when its closest evidence sentence
is both semantically similar and shares most of its content words. The rule checks (numbers, names,
absolute words) then catch the small edits embeddings do not see, such as "30 days" -> "45 days".
When the embedder cannot read the answer's language (Chinese for MiniLM), word overlap alone decides.

A sentence that cites documents ([doc_2], numbered by `prompts.evidence.doc_labels` as the generators number them)
is checked against those documents only: a citation must point at what supports the sentence, and another
document saying the same does not make it right. An uncited sentence is checked against all the evidence. A
sentence that addresses the assistant (instructions copied from a planted document, `quality/injection.py`) is
never grounded, so such an answer is never shown; nor one citing a document the evidence does not have. Other rule
findings (a name or number no passage of the run holds) lower the score and are counted as a feature of the draft's
probability, not a veto.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from selfcrag.contract import Embedder, GroundednessCheck, Strip
from selfcrag.knowledge.embeddings import embed, for_run, reads, stored_for_run
from selfcrag.language import CJK, language_of
from selfcrag.offline.comparison import is_verdict
from selfcrag.prompts import messages
from selfcrag.prompts.evidence import doc_labels
from selfcrag.quality.injection import is_instruction
from selfcrag.text.cuts import GLUED, evidence_sentences
from selfcrag.text.rules import rule_flags
from selfcrag.text.terms import strip_citations, terms_of
from selfcrag.text.text import fold, split_sentences, words

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


_REF = re.compile(r"\[((?:doc|web)_\d+)\]")
# Citation markers after a sentence's full stop ("... 30 days. [doc_1] Refunds ...", as the offline generator writes
# them) belong to that sentence: moved before the stop, they stay with it when the answer is cut into sentences.
_MARKERS_AFTER_STOP = re.compile(r"([.!?。！？；])((?:\s*\[(?:doc|web)_\d+\])+)")


def cited_sentences(answer: str) -> list[tuple[str, list[str]]]:
    """The answer's sentences without citation markers, each with the labels it cites (none: uncited)."""
    out = []
    for sentence in split_sentences(_MARKERS_AFTER_STOP.sub(r"\2\1", answer)):
        plain = strip_citations(sentence)
        if words(plain):
            out.append((plain, list(dict.fromkeys(_REF.findall(sentence)))))
    return out


def instruction_claim(sentence: str) -> str:
    """How an answer sentence that addresses the assistant is listed as unsupported: described, not quoted, so the
    abstention that may name unsupported statements never repeats the planted text to the user."""
    return messages.phrase("instruction_in_answer", language_of(sentence))


def instruction_flag(sentence: str) -> str:
    return f"instructions to the assistant in the answer: {sentence[:80]!r}"


def citation_scope(refs: list[str], strips: list[Strip]) -> tuple[set[str], list[str]]:
    """(the doc ids the labels name, the labels that name no document of the evidence)."""
    docs = {label: doc_id for doc_id, label in doc_labels(strips).items()}
    return {docs[r] for r in refs if r in docs}, [r for r in refs if r not in docs]


MIN_COPIED_WORDS = 3  # a copied sentence proves support only when it says something ("Yes." is not a claim)


def copied_from(sentence: str, text: str) -> bool:
    """Whether `sentence` (citation markers removed) is copied from `text`, after case, punctuation and width: what
    the evidence states in its own words is stated, whatever a grader thinks of it."""
    return len(words(sentence)) >= MIN_COPIED_WORDS and _normalised(sentence) in _normalised(text)


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

    def check(self, answer: str, strips: list[Strip], settings: Context, question: str = "",
              given: str = "") -> GroundednessCheck:
        cited = cited_sentences(answer)
        sentences = [sentence for sentence, _ in cited]
        if not sentences:  # nothing to check
            return GroundednessCheck(score=0.0, grounded=False, vetoed=True)
        texts = [GLUED.sub(". ", s["text"]) for s in strips]
        evidence_text = "\n".join(texts)
        evidence, owners = [], []  # every evidence sentence, and the document it is from
        for strip, text in zip(strips, texts, strict=True):
            for e in evidence_sentences(text):
                evidence.append(e)
                owners.append(strip["doc_id"])
        if not evidence:
            return GroundednessCheck(score=0.0, grounded=False, unsupported=sentences, flags=rule_flags(answer, ""),
                                     vetoed=True)  # no evidence to check against

        embedder = for_run(self.embedder, settings)
        vectors = embed(embedder, [*sentences, *evidence], stored_for_run(self.embedder, settings))
        sims = vectors[: len(sentences)] @ vectors[len(sentences) :].T
        evidence_words = [terms_of(e) for e in evidence]
        scopes: dict[frozenset[str], _Scope] = {}  # per set of cited documents: what those documents say

        def scope_of(docs: frozenset[str]) -> _Scope:
            if docs not in scopes:
                rows = [j for j, owner in enumerate(owners) if not docs or owner in docs]
                text = evidence_text if not docs else "\n".join(t for s, t in zip(strips, texts, strict=True)
                                                                 if s["doc_id"] in docs)  # fmt: skip
                scopes[docs] = _Scope(rows, text, _normalised(text), set().union(*(evidence_words[j] for j in rows)))
            return scopes[docs]

        unsupported: list[str] = []
        flags: list[str] = []
        instructed = dangling = False  # instructions planted in a document, a citation to nothing: never shown
        findings = 0
        for i, (sentence, refs) in enumerate(cited):
            if is_instruction(sentence):
                instructed = True
                unsupported.append(instruction_claim(sentence))
                flags.append(instruction_flag(sentence))
                continue
            docs, unknown = citation_scope(refs, strips)
            if unknown:  # a label the evidence never had: the citation points at nothing
                dangling = True
                flags.append(f"cites {', '.join(unknown)}, which the evidence does not have")
                unsupported.append(sentence)
                continue
            scope = scope_of(frozenset(docs))
            if not scope.rows:  # the cited documents have no text to check against
                unsupported.append(sentence)
                continue
            own = terms_of(sentence)
            sentence_flags = rule_flags(sentence, scope.text, given)
            findings += len(sentence_flags)
            flags.extend(f for f in sentence_flags if f not in flags)
            if sentence_flags:  # a wrong number or an invented name: the sentence is not supported as a whole
                unsupported.append(sentence)
                continue
            if not own or _normalised(sentence) in scope.whole or is_verdict(sentence):
                continue  # copied from the evidence it cites (or no content to check: a bare "Yes." claims what
                # the sentences after it state, and those are checked)
            similar = sims[i][scope.rows] if reads(embedder, sentence) else None
            if not _supported(sentence, own, similar, [evidence[j] for j in scope.rows],
                              [evidence_words[j] for j in scope.rows], scope.words):  # fmt: skip
                unsupported.append(sentence)

        supported_share = 1 - len(unsupported) / len(sentences)
        score = min(1.0, max(0.0, supported_share - FLAG_PENALTY * len(flags)))
        grounded = score >= settings.thresholds().groundedness and not instructed
        return GroundednessCheck(score=round(score, 4), grounded=grounded, unsupported=unsupported, flags=flags,
                                 findings=findings, vetoed=instructed or dangling)


@dataclass
class _Scope:
    """The evidence a sentence is checked against: all of it, or the documents the sentence cites."""

    rows: list[int]  # indices of its sentences in the evidence
    text: str
    whole: str  # `_normalised(text)`
    words: set[str]
