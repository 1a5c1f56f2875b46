"""Knowledge refinement on the model backend (decompose-then-recompose): passages are cut into strips of a few
sentences, each strip is scored against the question, and the best are kept within `max_strips` and
`strip_token_budget`. Strips keep their passage ids, so citations still point at the source documents.

`refine_with="scores"` (default) scores strips without a model or an embedding: the passage's retrieval score
(semantic and keyword, fused) plus the strip's coverage of the question's terms. The offline refiner embeds
every sentence instead, which on a 2-core machine costs more time than a model round trip (~25 ms a sentence,
60-80 sentences per question); here the model grader has already judged every passage, so ranking strips
within them needs less. `"llm"` asks the grader model which strips help, in one call; if that call fails, the
local scores decide (fails open).

Two settings add evidence the scores would leave out: `strip_every_passage` (each passage the grader kept gives its
best strip) and `strip_window` (the strips next to a kept one). Both keep within `max_strips` and the token budget.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from selfcrag.contract import Passage, Refinement, Strip
from selfcrag.llm.structured import Score, ask
from selfcrag.offline.refine import MIN_STRIP_SCORE, RELATIVE_FLOOR, STRIP_SIM_WEIGHT
from selfcrag.prompts import grading as prompts
from selfcrag.prompts.system import version
from selfcrag.text import cuts
from selfcrag.text.terms import coverage, question_terms
from selfcrag.text.text import approx_tokens

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels


class StripPick(BaseModel):
    id: str
    score: Score = 1.0


class StripChoice(BaseModel):
    """The strips that help answer the question, best first."""

    keep: list[StripPick]


def strips_of(passages: list[Passage], size: int) -> list[Strip]:
    """Each passage cut into strips of `size` sentences (scored later), each with its place in the passage."""
    strips = []
    for p in passages:
        start = 0
        for text, sentences in cuts.strips_of(p["text"], size):
            strips.append(Strip(id=p["id"], doc_id=p["doc_id"], title=p["title"], source=p["source"], text=text,
                                score=p["score"], start=start, end=start + len(sentences)))  # fmt: skip
            start += len(sentences)
    return strips


def select(scored: list[Strip], settings: Context, floor: float = 0.0) -> list[Strip]:
    """The best strips, best first, within `max_strips` and the token budget; none below `floor` except the best."""
    kept: list[Strip] = []
    used = 0
    for strip in sorted(scored, key=lambda s: -s["score"]):  # stable: ties keep document order
        size = approx_tokens(strip["text"])
        if len(kept) >= settings.max_strips or (kept and strip["score"] < floor):
            break
        if used + size <= settings.strip_token_budget:
            kept.append(strip)
            used += size
    return kept


def fill(kept: list[Strip], more: Iterable[Strip], settings: Context) -> list[Strip]:
    """`kept` followed by the strips of `more`, in order, that it does not hold yet, within `max_strips` and the
    token budget (a strip too long for what is left is passed over; a shorter one later may fit)."""
    out = list(kept)
    have = {(s["id"], s.get("start")) for s in kept}
    used = sum(approx_tokens(s["text"]) for s in kept)
    for strip in more:
        if len(out) >= settings.max_strips:
            break
        key, size = (strip["id"], strip.get("start")), approx_tokens(strip["text"])
        if key not in have and used + size <= settings.strip_token_budget:
            out.append(strip)
            have.add(key)
            used += size
    return out


def add_each_passage(kept: list[Strip], scored: list[Strip], settings: Context) -> list[Strip]:
    """`kept` followed by the best strip of each passage it has none of, best first. The grader judged those
    passages relevant; the question-term scores alone would drop a passage that holds a second hop (it names the
    answer, not the question's words)."""
    best: dict[str, Strip] = {}
    for strip in scored:
        if strip["id"] not in best or strip["score"] > best[strip["id"]]["score"]:
            best[strip["id"]] = strip
    have = {s["id"] for s in kept}
    return fill(kept, sorted((s for i, s in best.items() if i not in have), key=lambda s: -s["score"]), settings)


def widen(kept: list[Strip], scored: list[Strip], settings: Context) -> list[Strip]:
    """`kept` (best first) followed by the strips within `strip_window` of a kept one in the same passage, nearest
    first. `scored` holds every strip in passage order. A passage's next sentences often carry on from a kept one
    without its words ("It aired on Fox"), so the question-term scores alone drop them."""
    place = {(s["id"], s.get("start")): i for i, s in enumerate(scored)}
    anchors = [(a["id"], place[(a["id"], a.get("start"))]) for a in kept if (a["id"], a.get("start")) in place]
    neighbours = (
        scored[i]
        for distance in range(1, settings.strip_window + 1)
        for passage, at in anchors
        for i in (at - distance, at + distance)
        if 0 <= i < len(scored) and scored[i]["id"] == passage
    )
    return fill(kept, neighbours, settings)


class LLMRefiner:
    def __init__(self, models: ChatModels) -> None:
        self.models = models

    def refine(self, question: str, passages: list[Passage], settings: Context) -> Refinement:
        candidates = strips_of(passages, settings.strip_sentences)
        if not candidates:
            return Refinement(strips=[])
        if settings.refine_with == "scores":
            return Refinement(strips=self.by_scores(question, candidates, settings))
        reply = ask(self.models, self.models.grader(settings), StripChoice,
                    prompts.refine(question, candidates, settings), settings, "refine")  # fmt: skip
        usage: dict[str, Any] = {"llm_calls": reply.calls, "tokens": reply.tokens,
                                 "prompt": version(settings, "refine")}
        if reply.value is None:
            return Refinement(strips=self.by_scores(question, candidates, settings), **usage,
                              error=f"{reply.error}; kept the strips with the best local scores (fails open)")
        picked: dict[int, Strip] = {}
        for pick in reply.value.keep:
            index = pick.id.strip().lower().lstrip("s#[").rstrip("]")
            if index.isdigit() and 1 <= int(index) <= len(candidates):  # ids the prompt showed, first pick wins
                picked.setdefault(int(index), Strip(**{**candidates[int(index) - 1], "score": round(pick.score, 4)}))
        kept = select(list(picked.values()), settings)
        return Refinement(strips=self.extend(kept, candidates, settings), **usage)

    def by_scores(self, question: str, candidates: list[Strip], settings: Context) -> list[Strip]:
        """The passage's retrieval score (in the place of the offline refiner's similarity) plus the strip's
        question-term coverage."""
        terms = question_terms(question)
        scored, on_topic = [], []
        for strip in candidates:  # a candidate's score is still its passage's retrieval score
            covered, _ = coverage(terms, strip["text"])
            score = STRIP_SIM_WEIGHT * strip["score"] + (1 - STRIP_SIM_WEIGHT) * covered
            scored.append(Strip(**{**strip, "score": round(score, 4)}))
            if covered > 0:
                on_topic.append(scored[-1])
        pool = on_topic or scored  # a strip with none of the question's terms is noise, unless all are so
        best = max(s["score"] for s in pool)
        kept = select(pool, settings, floor=max(MIN_STRIP_SCORE, RELATIVE_FLOOR * best))
        return self.extend(kept, scored, settings)

    @staticmethod
    def extend(kept: list[Strip], scored: list[Strip], settings: Context) -> list[Strip]:
        """The strips the settings add to those chosen: each passage's best (`strip_every_passage`), then the
        neighbours of each (`strip_window`)."""
        if settings.strip_every_passage:
            kept = add_each_passage(kept, scored, settings)
        return widen(kept, scored, settings) if settings.strip_window else kept
