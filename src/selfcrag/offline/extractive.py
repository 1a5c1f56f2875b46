"""An extractive generator: the answer is the best evidence sentence(s), copied verbatim, each cited.

Copying instead of writing means the offline answer can never state what the evidence does not; when no
sentence supports an answer the generator says what the evidence lacks instead of guessing. A yes/no or
comparison question the evidence decides (`offline/comparison.py`) is answered with the verdict first
("Yes.", or the option picked), then the deciding sentences. A sentence that
addresses the assistant (prompt injection) is never copied, even if one reaches the strips.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from selfcrag.contract import Citation, Draft, Embedder, Strip, Turn
from selfcrag.knowledge.embeddings import embed, for_run, stored_for_run
from selfcrag.language import language_of
from selfcrag.offline import comparison
from selfcrag.offline.offline_grading import similarity_or_stand_in
from selfcrag.prompts import messages
from selfcrag.prompts.evidence import doc_labels
from selfcrag.quality.constraints import Violation, violations
from selfcrag.quality.injection import is_instruction
from selfcrag.text.cuts import clean
from selfcrag.text.rules import is_identifier, names
from selfcrag.text.terms import answer_type, coverage, has_answer_type, key_terms, question_terms, strip_citations
from selfcrag.text.text import STOPWORDS, split_sentences, term, words

if TYPE_CHECKING:
    from selfcrag.context import Context

# Sentence score weights: question-term coverage, similarity, expected answer type present.
WEIGHTS = {"coverage": 0.4, "similarity": 0.4, "type": 0.2}
MIN_SUPPORT = 0.45  # below this the best sentence does not answer the question: say so instead
SECOND_MARGIN = 0.15  # a second sentence must score within this of the first ...
# ... and add something: a question term the first lacks, or the expected answer type the first lacks.


def normalise(sentence: str) -> str:
    """For comparing sentences: no citation markers, case, spacing or final punctuation."""
    return " ".join(strip_citations(sentence).lower().split()).rstrip(".!?;: 。！？；：")


@dataclass
class Candidate:
    sentence: str
    strip: Strip
    score: float
    typed: bool  # holds the expected type of answer (a number for "how many", ...)
    missing: list[str]  # question terms it does not mention


class ExtractiveGenerator:
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def candidates(
        self, question: str, strips: list[Strip], avoid: list[str] | None = None, settings: Context | None = None
    ) -> list[Candidate]:
        """Every distinct evidence sentence, scored as an answer to the question, best first."""
        skip = {normalise(a) for a in avoid or []}
        pool: list[tuple[str, Strip]] = []
        seen: set[str] = set()
        for strip in strips:
            for sentence in split_sentences(strip["text"]):
                sentence, key = clean(sentence), normalise(clean(sentence))
                # Markdown headings name a topic but answer nothing; instructions to the assistant are not evidence.
                if (key and key not in seen and key not in skip and words(sentence) and not sentence.startswith("#")
                        and not is_instruction(sentence)):
                    seen.add(key)
                    pool.append((sentence, strip))
        if not pool:
            return []
        terms, kind, language = question_terms(question), answer_type(question), language_of(question)
        embedder = for_run(self.embedder, settings) if settings else self.embedder
        vectors = embed(embedder, [question, *[sentence for sentence, _ in pool]],
                        stored_for_run(self.embedder, settings))
        sims = vectors[1:] @ vectors[0]
        out = []
        for (sentence, strip), sim in zip(pool, sims, strict=True):
            covered, missing = coverage(terms, sentence)
            typed = has_answer_type(kind, sentence, question)
            signal = similarity_or_stand_in(embedder, question, float(sim), sentence, strip["title"])
            if kind == "generic":  # nothing to type-check: coverage and similarity share the weight
                score = 0.5 * covered + 0.5 * signal
            else:
                score = WEIGHTS["coverage"] * covered + WEIGHTS["similarity"] * signal + WEIGHTS["type"] * typed
            out.append(Candidate(sentence, strip, round(score, 4), typed, missing))
        # A question naming an identifier (E1042) is about that id: a sentence without it speaks of something else,
        # however alike it reads ("If an error keeps appearing ..."), so the sentences naming it go first.
        named = any(not lost_ids(c) for c in out)
        ranked = sorted(out, key=lambda c: (named and bool(lost_ids(c)), -c.score))  # stable: ties keep evidence order
        # The answer quotes evidence in the question's language when some supports an answer (the sample has its
        # error codes in English and Chinese); other languages only when none does.
        same = [c for c in ranked if language_of(c.sentence) == language]
        return same if same and same[0].score >= MIN_SUPPORT else ranked

    def generate(
        self,
        question: str,
        strips: list[Strip],
        settings: Context,
        avoid: list[str] | None = None,
        history: list[Turn] | None = None,  # unused: a quoted sentence does not change with the conversation
    ) -> Draft:
        evidence = "\n".join(s["text"] for s in strips)
        terms, language = question_terms(question), language_of(question)
        _, absent = coverage(terms, evidence)
        _, absent_keys = coverage(key_terms(question), evidence)
        if not strips or absent_keys:
            named = absent_keys or absent or list(terms.values())
            missing = messages.phrase("not_mentioned", language, messages.listing(named, language))
            return Draft(answer="", citations=[], missing=missing)
        decided = comparison.decide(question, strips)
        if decided and not {normalise(a) for a in avoid or []} & {normalise(s) for s, _ in decided.support}:
            return cite(decided.support, strips, lead=decided.verdict)
        ranked = self.candidates(question, strips, avoid, settings)
        ranked, swapped = keep_to_constraints(question, ranked)
        if swapped and (not ranked or ranked[0].score < MIN_SUPPORT):  # say what the evidence is about instead
            missing = messages.phrase("evidence_about_other", language, swapped.stated, swapped.asked)
            return Draft(answer="", citations=[], missing=missing, off_target=True)
        if not ranked:
            return Draft(answer="", citations=[], missing=messages.phrase("all_unsupported", language))
        best = ranked[0]
        if best.score < MIN_SUPPORT:
            kind = answer_type(question)
            if absent:
                missing = messages.phrase("not_mentioned", language, messages.listing(absent, language))
            elif messages.answer_type(kind) and not any(c.typed for c in ranked):
                missing = messages.phrase("type_not_in_evidence", language, messages.answer_type(kind, language))
            else:
                missing = messages.phrase("not_answered", language, question.strip())
            return Draft(answer="", citations=[], missing=missing)

        chosen = [best]
        for c in ranked[1:]:
            if len(chosen) >= settings.max_answer_sentences or c.score < best.score - SECOND_MARGIN:
                break
            if set(best.missing) - set(c.missing) or (c.typed and not best.typed):
                chosen.append(c)
        if len(chosen) < settings.max_answer_sentences:
            chosen += bridge_sentence(question, chosen, ranked)

        return cite([(c.sentence, c.strip) for c in chosen], strips)


def lost_ids(candidate: Candidate) -> list[str]:
    """The question's identifiers (E1042, user_123) the candidate sentence does not name."""
    return [word for word in candidate.missing if is_identifier(word)]


def _keys(text: str) -> set[str]:
    return {term(w) for w in words(text) if w not in STOPWORDS}


def bridge_sentence(question: str, chosen: list[Candidate], ranked: list[Candidate]) -> list[Candidate]:
    """The second hop of a bridge question, when the evidence has it. The best sentence answers the first hop and
    names the bridge ("... based on the series Het Huis Anubis"); what the question asks of the bridge ("first
    aired in what year") is in another passage, one that names the bridge, in a sentence covering the question
    terms the chosen ones lack, or holding the expected type of answer they lack. That sentence scores low on the
    whole question, so the ranking alone never quotes it. Nothing when the chosen sentences cover the question
    and hold its type, or no such sentence exists."""
    kind = answer_type(question)
    lacking = set.intersection(*(set(c.missing) for c in chosen))
    untyped = kind != "generic" and not any(c.typed for c in chosen)
    if not (lacking or untyped):
        return []
    asked = _keys(question)
    bridges = {key for c in chosen for name in names(c.sentence) for key in _keys(name)} - asked
    hop = {c.strip["id"] for c in chosen}
    for c in ranked:
        passage = f"{c.strip['title']}\n{c.strip['text']}"
        if c in chosen or c.strip["id"] in hop or not bridges & _keys(passage):
            continue
        if (untyped and c.typed) or (not untyped and lacking - set(c.missing)):
            return [c]
    return []


def cite(chosen: list[tuple[str, Strip]], strips: list[Strip], lead: str = "") -> Draft:
    """The answer: `lead` (a verdict) as its own sentence, then each chosen sentence with its citation."""
    labels = doc_labels(strips)  # the numbering the groundedness checkers read citations with
    stop = "。" if lead and language_of(lead) == "zh" else ". "
    parts, citations = [lead.rstrip(".") + stop] if lead else [], []
    seen: set[str] = set()
    for sentence, strip in chosen:
        sentence = clean(sentence)
        if normalise(sentence) in seen:  # two options may be decided by one sentence
            continue
        seen.add(normalise(sentence))
        ref = labels[strip["doc_id"]]
        parts.append(f"{sentence} [{ref}] ")
        citations.append(Citation(ref=ref, doc_id=strip["doc_id"], title=strip["title"], source=strip["source"],
                                  quote=sentence))
    return Draft(answer="".join(parts).strip(), citations=citations)


def keep_to_constraints(question: str, ranked: list[Candidate]) -> tuple[list[Candidate], Violation | None]:
    """The candidates without those about another entity, number or qualifier than the question asks
    (quality.constraints), read with their passage for aliases, and the best one's violation. Only candidates that
    could be chosen (MIN_SUPPORT and up) are checked: the rest are never quoted."""
    kept, first = [], None
    for c in ranked:
        passage = f"{c.strip['title']}\n{c.strip['text']}"
        found = violations(question, c.sentence, passage) if c.score >= MIN_SUPPORT else []
        if found:
            first = first or found[0]
        else:
            kept.append(c)
    return kept, first
