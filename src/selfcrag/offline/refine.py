"""CRAG's knowledge refinement (decompose-then-recompose), offline.

Decompose each passage into strips of a few sentences, score every strip against the question, drop the
clearly irrelevant ones, and recompose the best into the evidence for generation, within a token budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from selfcrag.contract import Embedder, Passage, Refinement, Strip
from selfcrag.knowledge.embeddings import embed, for_run, stored_for_run
from selfcrag.offline.offline_grading import similarity_or_stand_in
from selfcrag.text.cuts import strips_of
from selfcrag.text.terms import coverage, question_terms
from selfcrag.text.text import approx_tokens

if TYPE_CHECKING:
    from selfcrag.context import Context

STRIP_SIM_WEIGHT = 0.6  # strips are short, so similarity is less diluted than for whole passages
MIN_STRIP_SCORE = 0.2  # below this a strip is off-topic whatever the others score
RELATIVE_FLOOR = 0.5  # ... and a strip scoring under half the best one only adds noise


def _fit(sentences: list[str], budget: int) -> tuple[str, int]:
    """The leading sentences that fit the budget, and how many they are (a strip longer than the whole budget is
    cut, not lost: 0 when even its first sentence had to be cut)."""
    kept: list[str] = []
    for sentence in sentences:
        if approx_tokens(" ".join([*kept, sentence])) > budget:
            break
        kept.append(sentence)
    return (" ".join(kept), len(kept)) if kept else (" ".join(" ".join(sentences).split()[:budget]), 0)


class StripRefiner:
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def refine(self, question: str, passages: list[Passage], settings: Context) -> Refinement:
        size = settings.strip_sentences
        candidates = [(p, text, group, j * size) for p in passages
                      for j, (text, group) in enumerate(strips_of(p["text"], size))]  # fmt: skip
        if not candidates:
            return Refinement(strips=[])
        texts = [text for _, text, _, _ in candidates]
        sentences = [s for _, _, group, _ in candidates for s in group]
        embedder = for_run(self.embedder, settings)
        vectors = embed(embedder, [question, *texts, *sentences], stored_for_run(self.embedder, settings))
        q, strip_vecs, sentence_sims = vectors[0], vectors[1 : len(texts) + 1], vectors[len(texts) + 1 :] @ vectors[0]
        terms = question_terms(question)
        scored: list[tuple[float, int]] = []
        start = 0
        for i, (_, _, group, _) in enumerate(candidates):
            # A strip is as relevant as its best sentence: one answering sentence beside a filler one counts.
            similarity = max(float(strip_vecs[i] @ q), float(np.max(sentence_sims[start : start + len(group)])))
            start += len(group)
            covered, _ = coverage(terms, texts[i])
            signal = similarity_or_stand_in(embedder, question, similarity, texts[i], candidates[i][0]["title"])
            scored.append((STRIP_SIM_WEIGHT * signal + (1 - STRIP_SIM_WEIGHT) * covered, i))
        scored.sort(key=lambda item: (-item[0], item[1]))  # score desc, then document order: stable
        floor = max(MIN_STRIP_SCORE, RELATIVE_FLOOR * scored[0][0])
        strips: list[Strip] = []
        used = 0
        for rank, (score, i) in enumerate(scored):
            if len(strips) >= settings.max_strips or (score < floor and rank > 0):
                break  # the best strip is always kept: the passages were graded relevant enough to refine
            passage, text, group, first = candidates[i]
            whole = len(group)
            if used + approx_tokens(text) > settings.strip_token_budget:
                if strips:
                    continue  # a shorter, lower-ranked strip may still fit
                text, whole = _fit(group, settings.strip_token_budget)
            used += approx_tokens(text)
            # `end` counts whole sentences only, so the next strip never runs on from a cut one
            strips.append(Strip(id=passage["id"], doc_id=passage["doc_id"], title=passage["title"],
                                source=passage["source"], text=text, score=round(score, 4), start=first,
                                end=first + whole))  # fmt: skip
        return Refinement(strips=strips)


def _key(strip: Strip) -> tuple[str, str]:
    return strip["id"], " ".join(strip["text"].split())


def accumulate(evidence: list[Strip], new: list[Strip], settings: Context) -> tuple[list[Strip], list[Strip]]:
    """(the run's evidence with this round's strips merged in, the knowledge generation gets from it).

    Evidence is kept per chunk and text: a chunk found again keeps its best score, so a second hop adds to the
    first instead of replacing it. Every strip is scored against the question (not the round's query), so scores
    of different rounds compare. Knowledge is the evidence by score within `max_strips` and `strip_token_budget`,
    and always holds this round's best strip: a second hop names the answer, not the question's words, so it
    scores below the first hop's strips and would otherwise never reach generation."""
    merged: dict[tuple[str, str], Strip] = {}
    for strip in [*evidence, *new]:
        key = _key(strip)
        if key not in merged or strip["score"] > merged[key]["score"]:
            merged[key] = strip
    pool = sorted(merged.values(), key=lambda s: -s["score"])  # stable: equal scores keep the order found
    leader = max(new, key=lambda s: s["score"], default=None)
    ordered = ([merged[_key(leader)]] if leader else []) + [s for s in pool if not leader or _key(s) != _key(leader)]
    chosen: list[Strip] = []
    used = 0
    for strip in ordered:
        if len(chosen) >= settings.max_strips:
            break
        if chosen and used + approx_tokens(strip["text"]) > settings.strip_token_budget:
            continue  # a shorter, lower-ranked strip may still fit
        used += approx_tokens(strip["text"])
        chosen.append(strip)
    return pool, sorted(chosen, key=lambda s: -s["score"])
