"""Offline graders: the CRAG retrieval evaluator and Self-RAG's usefulness check, without a language model.

Both mix two cheap signals: embedding similarity (catches paraphrases) and coverage of the question's
content words (catches a passage that is on-topic but lacks the one term the question is about, such as an
error code or a place). The helpers here (term coverage, expected answer type, a shared embedding cache)
are reused by the refiner, the extractive generator and the groundedness checker.
Constants were picked on the SQuAD 2.0 dev sample, HaluEval and the bundled sample questions
(benchmarks/offline_components_check.py).
"""

from __future__ import annotations

import re
import threading
import unicodedata
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Literal

import numpy as np

from selfcrag.components.base import AnswerGrade, Embedder, Grade, Grading, Label, Passage
from selfcrag.components.text import QUESTION_WORDS, STOPWORDS, numbers, split_sentences, stem, words
from selfcrag.quality.rules import names

if TYPE_CHECKING:
    from selfcrag.context import Context

# Cosine similarities of all-MiniLM-L6-v2 are rescaled to [0, 1]: unrelated text sits around 0.0-0.2,
# a sentence that answers a question around 0.5-0.8.
SIM_FLOOR, SIM_CEIL = 0.2, 0.7
# Relevance = weighted similarity + coverage. Similarity is the max of the whole passage and its best
# sentence: one sentence that matches the question is good evidence even inside a long, diluted passage.
RELEVANCE_SIM_WEIGHT = 0.55

_CITATION = re.compile(r"\s*\[(?:doc|web)_\d+\](?:\s*\[(?:doc|web)_\d+\])*")


def strip_citations(text: str) -> str:
    """The text without citation markers such as [doc_1]."""
    return _CITATION.sub("", text).strip()


# --- embeddings ---------------------------------------------------------------------------------------------

_CACHE_SIZE = 8192
_caches: weakref.WeakKeyDictionary[object, OrderedDict[str, np.ndarray]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def embed(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Embeddings of `texts`, one batch call for those not seen yet. Grading, refinement, generation and the
    groundedness check embed many of the same sentences in one run, so a small per-embedder cache pays."""
    if not texts:
        return embedder.embed_documents([])
    try:
        with _lock:
            cache = _caches.setdefault(embedder, OrderedDict())
            found = {t: cache[t] for t in texts if t in cache}
    except TypeError:  # an embedder that cannot be weakly referenced: no cache
        return embedder.embed_documents(texts)
    todo = [t for t in dict.fromkeys(texts) if t not in found]
    if todo:
        found.update(zip(todo, embedder.embed_documents(todo), strict=True))
        with _lock:
            for text in todo:
                cache[text] = found[text]
            while len(cache) > _CACHE_SIZE:
                cache.popitem(last=False)
    return np.stack([found[t] for t in texts])


def scaled(similarity: float) -> float:
    """Cosine similarity mapped to [0, 1] over the range where it carries information."""
    return float(min(1.0, max(0.0, (similarity - SIM_FLOOR) / (SIM_CEIL - SIM_FLOOR))))


# --- question terms -----------------------------------------------------------------------------------------


def term(word: str) -> str:
    """A matching key for a word: text.stem plus two fixes so more inflections meet ("shipping"/"ship" and
    "arrives"/"arrive" stem differently): no final e, no doubled final consonant."""
    s = stem(word)
    if len(s) >= 4 and s.endswith("e"):
        s = s[:-1]
    if len(s) >= 4 and s[-1] == s[-2] and s[-1] not in "aeiouslz":
        s = s[:-1]
    return s


def fold(text: str) -> str:
    """ASCII letters for matching: "Möngke" and "Mongke" meet (text.words only keeps ASCII letters)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def terms_of(text: str) -> set[str]:
    return {term(w) for w in words(fold(text)) if w not in STOPWORDS}


# Light verbs of questions carry no topic ("what does E1042 mean", "how do I get ...").
_QUESTION_VERBS = frozenset({"mean", "get", "got", "happen", "happens", "tell", "know", "need", "want", "use"})


def question_terms(question: str) -> dict[str, str]:
    """The question's content words: matching key -> the word as asked (for messages like 'missing: refund').
    The word after "how" (how long, how soon, how old) asks for the answer type, it is not a topic."""
    tokens = words(fold(question))
    terms: dict[str, str] = {}
    for i, w in enumerate(tokens):
        if w in STOPWORDS or w in QUESTION_WORDS or w in _QUESTION_VERBS or (i and tokens[i - 1] == "how"):
            continue
        terms.setdefault(term(w), w)
    return terms


def coverage(terms: dict[str, str], text: str) -> tuple[float, list[str]]:
    """Share of the question terms present in `text`, and the missing ones (as asked)."""
    if not terms:
        return 1.0, []
    present = terms_of(text)
    missing = [word for key, word in terms.items() if key not in present]
    return 1 - len(missing) / len(terms), missing


# --- expected answer type ------------------------------------------------------------------------------------

AnswerType = Literal["number", "date", "person", "place", "yesno", "reason", "generic"]

_AUXILIARIES = {"is", "are", "was", "were", "do", "does", "did", "can", "could", "will", "would", "should",
                "has", "have", "had", "may", "must", "shall", "am", "isn't", "aren't", "don't", "doesn't"}
_QUANTITY_NOUNS = {"cost", "price", "fee", "fees", "percentage", "percent", "amount", "population", "age",
                   "length", "height", "distance", "limit", "rate", "size", "weight", "temperature", "speed",
                   "number", "minimum", "maximum", "duration"}
_TIME_NOUNS = {"hours", "time", "times", "date", "dates", "year", "deadline", "schedule"}
# Cues of the expected answer; the earliest in the question decides ("What happens when ..." is no date).
_TYPE_CUES: list[tuple[re.Pattern[str], AnswerType]] = [
    (re.compile(r"\bhow (?:many|much|long|old|far|big|large|tall|high|often|fast|deep|wide|heavy|soon)\b"), "number"),
    (re.compile(r"\b(?:what|which) (?:year|date|day|month|time|century|decade)\b|\bwhen\b"), "date"),
    (re.compile(r"\b(?:who|whom|whose)\b"), "person"),
    (re.compile(r"\bwhere\b"), "place"),
    (re.compile(r"\bwhy\b"), "reason"),
    (re.compile(r"\b(?:what|which|how)\b"), "generic"),
]
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DATE = re.compile(
    rf"\b(?:{_MONTHS}|monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tomorrow|yesterday|"
    r"century|centuries|decade|decades|daily|weekly|monthly|annually|yearly|midnight|noon)\b|"
    r"\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}(?::\d{2})?\s*(?:a\.?m\.?|p\.?m\.?)|\b1\d{3}s?\b|\b20\d{2}s?\b|"
    r"\b\d+\s*(?:second|minute|hour|day|week|month|year)s?\b",
    re.IGNORECASE,
)
_REASON = re.compile(r"\b(?:because|since|due to|so that|in order to|as a result|caused|reason|to)\b", re.I)
_POLARITY = re.compile(r"\b(?:yes|no|not|never|cannot|can|only|must|may|will|always)\b|n't\b", re.I)
_PLACE = re.compile(r"\b(?:in|at|from|near|inside|outside|across|throughout|within|on)\s+(?:the\s+)?([A-Z][\w'-]*)")


def answer_type(question: str) -> AnswerType:
    """What kind of answer the question expects, from the wording of its (last) question sentence."""
    asked = [s for s in split_sentences(question) if s.rstrip().endswith("?")] or [question]
    q = asked[-1].lower()
    cues = [(m.start(), i, kind) for i, (cue, kind) in enumerate(_TYPE_CUES) if (m := cue.search(q))]
    if cues:
        start, _, kind = min(cues)
        following = set(words(q[start:])[1:6])
        if kind == "generic" and _QUANTITY_NOUNS & following:
            return "number"  # "what is the minimum password length", "which fee ..."
        if kind == "generic" and _TIME_NOUNS & following:
            return "date"  # "what are the opening hours"
        return kind
    tokens = words(q)
    return "yesno" if tokens and tokens[0] in _AUXILIARIES else "generic"


def has_answer_type(kind: AnswerType, text: str, question: str = "") -> bool:
    """Whether `text` contains the kind of answer expected (names must not just repeat the question's)."""
    if kind == "number":
        return bool(numbers(text)) or "$" in text or "%" in text
    if kind == "date":
        return bool(_DATE.search(text))
    if kind in ("person", "place"):
        asked = set(words(fold(question)))
        if kind == "place":  # "in Delhi", "at Account > Orders"; or the answer is a bare name
            found = _PLACE.findall(text) + (names(text) if len(text.split()) <= 4 else [])
        else:
            found = [name for sentence in split_sentences(text) for name in names(sentence)]
        return any(set(words(fold(name))) - asked - STOPWORDS for name in found)
    if kind == "reason":
        return bool(_REASON.search(text))
    if kind == "yesno":
        return bool(_POLARITY.search(text))
    return True


TYPE_MISSING = {
    "number": "no number",
    "date": "no date or time",
    "person": "no name of a person or organisation",
    "place": "no place",
    "reason": "no reason",
    "yesno": "no yes/no statement",
    "generic": "",
}


# --- the CRAG retrieval evaluator -----------------------------------------------------------------------------


class OfflineRelevanceGrader:
    """Grades each passage correct / ambiguous / incorrect from similarity and question-term coverage."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def grade(self, question: str, passages: list[Passage], settings: Context) -> Grading:
        if not passages:
            return Grading(grades=[])
        terms = question_terms(question)
        sentences = [split_sentences(p["text"]) or [p["text"]] for p in passages]
        flat = [s for group in sentences for s in group]
        vectors = embed(self.embedder, [question] + [p["text"] for p in passages] + flat)
        q, passage_vecs, sentence_vecs = vectors[0], vectors[1 : len(passages) + 1], vectors[len(passages) + 1 :]
        grades: list[Grade] = []
        start = 0
        for i, passage in enumerate(passages):
            n = len(sentences[i])
            best_sentence = float(np.max(sentence_vecs[start : start + n] @ q))
            start += n
            similarity = max(float(passage_vecs[i] @ q), best_sentence)
            covered, missing = coverage(terms, passage["title"] + "\n" + passage["text"])
            score = RELEVANCE_SIM_WEIGHT * scaled(similarity) + (1 - RELEVANCE_SIM_WEIGHT) * covered
            label: Label = (
                "correct" if score >= settings.upper_threshold
                else "incorrect" if score < settings.lower_threshold
                else "ambiguous"
            )
            found = len(terms) - len(missing)
            reason = f"covers {found}/{len(terms)} question terms"
            if missing:
                reason += f" (missing: {', '.join(missing)})"
            grades.append(Grade(id=passage["id"], label=label, score=round(score, 4),
                                reason=f"{reason}; similarity {similarity:.2f}"))
        return Grading(grades=grades)


def crag_action(grades: list[Grade], policy: str = "any") -> Label:
    """The CRAG action for a set of graded passages.

    `any` (the paper): correct if any passage is correct, incorrect if all are (or there are none).
    `ratio`: correct if at least 60% are correct, incorrect if at least 80% are incorrect, else ambiguous.
    """
    if not grades:
        return "incorrect"
    labels = [g["label"] for g in grades]
    if policy == "ratio":
        if labels.count("correct") >= 0.6 * len(labels):
            return "correct"
        if labels.count("incorrect") >= 0.8 * len(labels):
            return "incorrect"
        return "ambiguous"
    if policy != "any":
        raise ValueError(f"unknown CRAG policy {policy!r}; use 'any' or 'ratio'")
    if "correct" in labels:
        return "correct"
    if all(label == "incorrect" for label in labels):
        return "incorrect"
    return "ambiguous"


# --- Self-RAG's usefulness check ------------------------------------------------------------------------------

# Weights of the answer grade: the expected type of answer, question-term coverage, similarity. The type
# weighs most: an extractive answer often paraphrases the question, but "how many" needs a number.
ANSWER_WEIGHTS = {"type": 0.4, "coverage": 0.2, "similarity": 0.4}
# Almost any sentence "contains" a yes/no or a reason ("can", "to"): for those questions the type only
# costs when it is absent.
WEAK_TYPES = {"generic", "yesno", "reason"}
UNTYPED_FACTOR = 0.8


class OfflineAnswerGrader:
    """Does the answer address the question? Expected answer type + term coverage + similarity."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def grade(self, question: str, answer: str, settings: Context) -> AnswerGrade:
        text = strip_citations(answer)
        if not text:
            return AnswerGrade(score=0.0, useful=False, missing="no answer", reason="empty answer")
        kind = answer_type(question)
        typed = has_answer_type(kind, text, question)
        covered, missing_terms = coverage(question_terms(question), text)
        q, a = embed(self.embedder, [question, text])
        similarity = float(q @ a)
        if kind in WEAK_TYPES:  # no type worth rewarding: the other two signals share its weight
            w = ANSWER_WEIGHTS["coverage"] + ANSWER_WEIGHTS["similarity"]
            score = (ANSWER_WEIGHTS["coverage"] * covered + ANSWER_WEIGHTS["similarity"] * scaled(similarity)) / w
            score *= 1.0 if typed else UNTYPED_FACTOR
        else:
            score = (ANSWER_WEIGHTS["type"] * typed + ANSWER_WEIGHTS["coverage"] * covered
                     + ANSWER_WEIGHTS["similarity"] * scaled(similarity))
        missing = []
        if not typed:
            missing.append(f"{TYPE_MISSING[kind]} in the answer")
        if missing_terms:
            missing.append("does not mention: " + ", ".join(missing_terms))
        reason = (f"expects {kind}{'' if typed else ' (absent)'}; covers {covered:.0%} of question terms; "
                  f"similarity {similarity:.2f}")
        return AnswerGrade(score=round(score, 4), useful=score >= settings.answer_relevance_threshold,
                           missing="; ".join(missing), reason=reason)
