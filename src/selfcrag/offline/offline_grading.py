"""Offline graders: the CRAG retrieval evaluator and Self-RAG's usefulness check, without a language model.

Both mix two cheap signals: embedding similarity (catches paraphrases) and coverage of the question's
content words (catches a passage that is on-topic but lacks the one term the question is about, such as an
error code or a place). For a question in a language the embedder cannot read (Chinese for the local MiniLM),
the similarity is noise and `topic_signal` stands in for it. The embeddings come through the knowledge base
(`knowledge/embeddings.py` `embed`: the index's stored vectors first, then a cache the refiner, the extractive
generator and the groundedness checker share); what a question asks for and what a text covers lives in
`text/terms.py`. Constants were picked on the SQuAD 2.0 dev sample, HaluEval and the bundled sample questions
(benchmarks/offline_components_check.py, benchmarks/bilingual_sample.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from selfcrag.contract import AnswerGrade, Embedder, Grade, Grading, Label, Passage
from selfcrag.knowledge.embeddings import embed, for_run, reads, stored_for_run
from selfcrag.language import has_cjk, language_of
from selfcrag.prompts import messages
from selfcrag.quality.constraints import Violation, violations
from selfcrag.text.cuts import passage_texts
from selfcrag.text.opposites import Conflict, conflicts
from selfcrag.text.rules import is_identifier
from selfcrag.text.terms import answer_type, coverage, has_answer_type, key_terms, question_terms, strip_citations

if TYPE_CHECKING:
    from selfcrag.context import Context

# Cosine similarities of all-MiniLM-L6-v2 are rescaled to [0, 1]: unrelated text sits around 0.0-0.2,
# a sentence that answers a question around 0.5-0.8.
SIM_FLOOR, SIM_CEIL = 0.2, 0.7
# Relevance = weighted similarity + coverage. Similarity is the max of the whole passage and its best
# sentence: one sentence that matches the question is good evidence even inside a long, diluted passage.
RELEVANCE_SIM_WEIGHT = 0.55


def scaled(similarity: float) -> float:
    """Cosine similarity mapped to [0, 1] over the range where it carries information."""
    return float(min(1.0, max(0.0, (similarity - SIM_FLOOR) / (SIM_CEIL - SIM_FLOOR))))


def similarity_or_stand_in(embedder: Embedder, question: str, similarity: float, text: str, title: str) -> float:
    """The similarity on the [0, 1] scale of `scaled`, or its stand-in when the embedder cannot read the question
    (MiniLM's cosine between two Chinese texts is mostly [UNK] against [UNK], whatever they say)."""
    if reads(embedder, question):
        return scaled(similarity)
    stand_in = topic_signal(question, text, title)
    return 0.0 if stand_in is None else stand_in


def topic_signal(question: str, text: str, title: str | None) -> float | None:
    """How well `text` keeps to the question's topic, without a similarity. A question naming an id (E2001,
    user_123) is about that id: does the text name it? Otherwise: the question's terms in the text read with its
    document's title, as the index embeds it — a list item such as "E3007：优惠码已过期" never repeats its
    heading's words (错误代码). None when there is neither an id nor a title to go by."""
    ids = {key: word for key, word in key_terms(question).items() if is_identifier(word)}
    if ids:
        return coverage(ids, text)[0]
    return None if title is None else coverage(question_terms(question), f"{title}\n{text}")[0]


# --- the CRAG retrieval evaluator -----------------------------------------------------------------------------


class OfflineRelevanceGrader:
    """Grades each passage correct / ambiguous / incorrect from similarity and question-term coverage."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def grade(self, question: str, passages: list[Passage], settings: Context) -> Grading:
        if not passages:
            return Grading(grades=[])
        embedder = for_run(self.embedder, settings)
        terms = question_terms(question)
        folded_cjk = any(has_cjk(key) for key in terms)
        sentences = [passage_texts(p["text"])[1:] for p in passages]
        flat = [s for group in sentences for s in group]
        vectors = embed(embedder, [question] + [p["text"] for p in passages] + flat,
                        stored_for_run(self.embedder, settings))
        q, passage_vecs, sentence_vecs = vectors[0], vectors[1 : len(passages) + 1], vectors[len(passages) + 1 :]
        grades: list[Grade] = []
        start = 0
        for i, passage in enumerate(passages):
            n = len(sentences[i])
            best_sentence = float(np.max(sentence_vecs[start : start + n] @ q))
            start += n
            similarity = max(float(passage_vecs[i] @ q), best_sentence)
            covered, missing = coverage(terms, passage["title"] + "\n" + passage["text"])
            signal = similarity_or_stand_in(embedder, question, similarity, passage["text"], passage["title"])
            score = RELEVANCE_SIM_WEIGHT * signal + (1 - RELEVANCE_SIM_WEIGHT) * covered
            label: Label = (
                "correct" if score >= settings.upper_threshold
                else "incorrect" if score < settings.lower_threshold
                else "ambiguous"
            )
            # Chinese words count by their characters, so "n of m terms" only holds for English.
            reason = (f"covers {round(covered * len(terms))}/{len(terms)} question terms" if not folded_cjk
                      else f"covers {covered:.0%} of question terms")
            if missing:
                reason += f" (missing: {', '.join(missing)})"
            reason += f"; similarity {similarity:.2f}" + ("" if reads(embedder, question) else " (not used)")
            grades.append(Grade(id=passage["id"], label=label, score=round(score, 4), reason=reason))
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


# An answer that says the opposite of what the question asks (text.opposites) answers another question.
CONFLICT_FACTOR = 0.5
# So does one about another entity, number or qualifier than the one asked (quality.constraints): never useful,
# and its score (a confidence signal) halved like a conflict's.
CONSTRAINT_FACTOR = 0.5


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
        embedder = for_run(self.embedder, settings)
        q, a = embed(embedder, [question, text], stored_for_run(self.embedder, settings))
        similarity = float(q @ a)
        weights, signal = dict(ANSWER_WEIGHTS), scaled(similarity)
        if not reads(embedder, question):
            # No similarity and no title to read the answer with: an id the question names stands in, or else
            # the type and coverage share the weight.
            stand_in = topic_signal(question, text, None)
            signal, weights["similarity"] = (stand_in, weights["similarity"]) if stand_in is not None else (0.0, 0.0)
        if kind in WEAK_TYPES:  # no type worth rewarding: the other two signals share its weight
            w = weights["coverage"] + weights["similarity"]
            score = (weights["coverage"] * covered + weights["similarity"] * signal) / w
            score *= 1.0 if typed else UNTYPED_FACTOR
        else:
            score = (weights["type"] * typed + weights["coverage"] * covered
                     + weights["similarity"] * signal) / sum(weights.values())
        language = language_of(question)
        missing = []
        # "What is NOT ...?" answered by what is, "the least" by "the most", "nineteen" by "nine": the answer
        # is about something else than the question asks, however similar the words.
        found = conflicts(question, text)
        if found:
            score *= CONFLICT_FACTOR
            missing += [messages.conflict(c.kind, c.asked, c.stated, language) for c in found]
        swapped = constraint_violations(question, text, found)
        if swapped:
            score *= CONSTRAINT_FACTOR
            missing += [messages.conflict(v.kind, v.asked, v.stated, language) for v in swapped]
        if not typed:
            missing.append(messages.phrase("type_not_in_answer", language, messages.answer_type(kind, language)))
        if missing_terms:
            missing.append(messages.phrase("not_in_answer", language, messages.listing(missing_terms, language)))
        opposite = "".join(f"; asks {c.asked!r}, answer says {c.stated or 'what is'!r}" for c in found)
        opposite += "".join(f"; {v.describe()}" for v in swapped)
        reason = (f"expects {kind}{'' if typed else ' (absent)'}{opposite}; covers {covered:.0%} of question terms; "
                  f"similarity {similarity:.2f}")
        useful = score >= settings.thresholds().answer_relevance and not swapped
        return AnswerGrade(score=round(score, 4), useful=useful, missing=messages.separate(missing, language),
                           reason=reason, violations=len(swapped), term_coverage=round(covered, 4))


def constraint_violations(question: str, answer: str, found: list[Conflict] | None = None) -> list[Violation]:
    """The answer's constraint violations (quality.constraints), less another number where text.opposites
    already found one (`found`): "nineteen" answered by "nine" is one finding, not two."""
    numbered = any(c.kind == "number" for c in found or [])
    return [v for v in violations(question, answer) if not (numbered and v.kind == "number")]
