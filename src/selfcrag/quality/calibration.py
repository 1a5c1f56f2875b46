"""Confidence as a probability: the features of a finished run, and the calibrator that turns them into the
probability that the answer the graph would show is right.

Features are read from the final state and its trace only, the same way on both backends: retrieval scores,
relevance grades, groundedness and answer relevance come from whichever grader ran, and the text features (the
question's terms covered, the expected kind of answer present, an opposite of what was asked) are pure functions
of the question, the answer and the evidence. A new signal is one line in `FEATURES` and a refit
(`selfcrag calibrate`, or `benchmarks/calibration_fit.py` for the shipped file); the fitted file names the features
it uses, so an older file keeps working when features are added.

The calibrator is a logistic regression on standardised features, fitted by `evaluation/calibrate.py`; applying it
is a dot product and a sigmoid. Its parameters and their provenance live in a JSON file
(`data/calibration/offline.json` ships; the `calibration` setting names another).

A file also says which drafts its probability is for (`ungrounded_drafts`). `withheld` (the default): only drafts
the groundedness check passed may be shown, and the fit saw only those. `scored`: a draft the check did not pass is
a candidate too, its groundedness one feature among the others, because the fit was made on runs that kept such
drafts. For a checker whose verdict is weak evidence (a small model's), a hard gate withholds right answers the
other signals vouch for; the calibrated probability weighs it instead. A vetoed draft (a rule finding such as a
number the cited evidence lacks, copied instructions, or no check at all) is never shown either way.

A file may also say whether correcting pays for the runs it was fitted on (`corrections.pay`, default true): a
model's own fit compares, on tuning runs made with the full budget, each question decided from plain's draft alone
with the same question decided from every candidate the corrections added (benchmarks/model_fit.py). Where the
corrections lowered Phi at the cost, `pay` is false and a run ends once plain's draft is checked: for that model the
calls a correction spends bought more wrong answers than right ones.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from selfcrag.endpoints import model_configured
from selfcrag.errors import CalibrationError
from selfcrag.quality.constraints import same, tokens
from selfcrag.text.opposites import conflicts
from selfcrag.text.terms import answer_type, coverage, has_answer_type, question_terms, strip_citations

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.state import State


@dataclass(frozen=True)
class Run:
    """What the features read: the final state, its trace by node, and the text of the draft answer."""

    state: State
    answer: str  # the draft the graph would show, without citation marks ("" when there is none)
    contradicted: bool  # the draft contradicts an earlier answer in the thread

    def steps(self, node: str) -> list[dict[str, Any]]:
        return [dict(step) for step in self.state.get("trace") or [] if step.get("node") == node]

    def first(self, node: str, key: str) -> list[dict[str, Any]]:
        steps = self.steps(node)
        return list(steps[0].get(key) or []) if steps else []

    def cited_text(self) -> str:
        strips = self.state.get("knowledge") or []
        cited = {c["doc_id"] for c in self.state.get("citations") or []}
        return "\n".join(s["text"] for s in strips if s["doc_id"] in cited) or "\n".join(s["text"] for s in strips)


def _verified(run: Run) -> float | None:
    """The local verifier's P(yes) for this run's draft (nodes/verify.py); None when it did not measure this draft
    (off, a fault, or another draft than the one it was asked about)."""
    steps = run.steps("verify")
    step = steps[-1] if steps else {}
    score = step.get("score")
    if step.get("error") or not isinstance(score, int | float) or step.get("verified") != run.answer:
        return None
    return float(score)


def _first_scores(run: Run) -> list[float]:
    return sorted((float(p["score"]) for p in run.first("retrieve", "passages")), reverse=True)


def _margin(run: Run) -> float:
    scores = _first_scores(run)
    return scores[0] - scores[1] if len(scores) > 1 else (scores[0] if scores else 0.0)


def _grades(run: Run) -> list[dict[str, Any]]:
    return run.first("grade_documents", "grades")


def _share(items: list[Any], keep: Callable[[Any], bool]) -> float:
    return sum(1 for item in items if keep(item)) / len(items) if items else 0.0


def _covered(run: Run, text: str) -> float:
    return coverage(question_terms(run.state.get("question", "")), text)[0] if text else 0.0


def _typed(run: Run) -> float:
    question = run.state.get("question", "")
    return float(bool(run.answer) and has_answer_type(answer_type(question), run.answer, question))


def _answer_chunk(run: Run) -> str:
    """The chunk the answer rests on: the most relevant strip of a cited document (of any strip when the answer
    cites none), else the first round's best passage."""
    strips = run.state.get("knowledge") or []
    cited = {c["doc_id"] for c in run.state.get("citations") or []}
    used = [s for s in strips if s["doc_id"] in cited] or list(strips)
    if used:
        return str(max(used, key=lambda s: float(s["score"]))["id"])
    first = run.first("retrieve", "passages")
    return str(first[0]["id"]) if first else ""


def _retrievers_agree(run: Run) -> float:
    """1 / (1 + the worse of the two retrievers' ranks) of the answer's chunk: 1 when vector and keyword search
    both ranked it first, 0 when one of them did not propose it (or the retriever reports no ranks)."""
    chunk = _answer_chunk(run)
    for step in run.steps("retrieve"):
        for passage in step.get("passages") or []:
            if passage.get("id") == chunk:
                ranks = [passage.get("vector_rank"), passage.get("keyword_rank")]
                return 0.0 if None in ranks else 1 / (1 + max(int(r) for r in ranks if r is not None))
    return 0.0


def _names_found(run: Run) -> float:
    """Share of the names the question uses (capitalised words, numbers) that the cited evidence (its titles
    and text) also holds: evidence about another person, year or product misses them. 1 when it names none."""
    names = [t for t in tokens(run.state.get("question", "")) if t.sort in ("name", "number") and not t.function]
    if not names:
        return 1.0
    strips = run.state.get("knowledge") or []
    cited = {c["doc_id"] for c in run.state.get("citations") or []}
    used = [s for s in strips if s["doc_id"] in cited] or list(strips)
    held = tokens(" \n".join(f"{s['title'].replace('_', ' ')}. {s['text']}" for s in used))
    keys = {t.key for t in held}
    return sum(1 for n in names if n.key in keys or any(same(n, t) for t in held)) / len(names)


def _last_grade(run: Run, key: str, default: float) -> float:
    """A number the last answer grading recorded (constraint violations, term coverage)."""
    steps = run.steps("grade_answer")
    value = steps[-1].get(key) if steps else None
    return float(value) if isinstance(value, int | float) else default


def _grade_margin(run: Run) -> float:
    scores = sorted((float(g["score"]) for g in _grades(run)), reverse=True)
    return scores[0] - scores[1] if len(scores) > 1 else (scores[0] if scores else 0.0)


def _drafted_by(run: Run) -> str:
    """The node that wrote the run's latest draft."""
    return str(_draft_step(run.state).get("node") or "")


def _draft_step(state: State) -> dict[str, Any]:
    """The trace step that wrote the run's latest draft."""
    steps = [s for s in state.get("trace") or [] if s.get("node") in ("first_draft", "generate")]
    return dict(steps[-1]) if steps else {}


def _last_check(run: Run) -> dict[str, Any]:
    steps = run.steps("check_hallucination")
    return steps[-1] if steps else {}


def _evidence_changed(run: Run) -> float:
    rounds = [{p["id"] for p in step.get("passages") or []} for step in run.steps("retrieve")]
    return float(any(ids != rounds[0] for ids in rounds[1:]))


# Every candidate feature, by name: how it reads the run, and which way it should move the probability (+1: more
# is better evidence of a right answer). A fit whose weight goes against that direction is refused (the fitter
# drops the feature), so the calibrator stays monotone in every signal and its ranking means the same on a backend
# it was not fitted on.
FEATURES: dict[str, tuple[int, Callable[[Run], float]]] = {
    "retrieval_top": (+1, lambda r: (_first_scores(r) or [0.0])[0]),  # best first-round retrieval score
    "retrieval_margin": (+1, _margin),  # best minus second: one clear passage, or many alike
    "grade_top": (+1, lambda r: max((float(g["score"]) for g in _grades(r)), default=0.0)),
    "grade_correct_share": (+1, lambda r: _share(_grades(r), lambda g: g["label"] == "correct")),
    "context_relevance": (+1, lambda r: max((float(s["score"]) for s in r.state.get("knowledge") or []),
                                            default=0.0)),
    "evidence_coverage": (+1, lambda r: _covered(r, r.cited_text())),  # the question's terms in the cited evidence
    "answer_coverage": (+1, lambda r: _covered(r, r.answer)),  # ... and in the answer sentence itself
    "answer_type": (+1, _typed),  # the kind of answer asked for (number, date, person, place) is there
    "groundedness": (+1, lambda r: float(r.state.get("groundedness", 0.0))),
    "answer_relevance": (+1, lambda r: float(r.state.get("answer_relevance", 0.0))),
    "unsupported": (-1, lambda r: float(len(r.state.get("unsupported_claims") or []))),
    "extra_rounds": (-1, lambda r: float(max(0, len(r.steps("retrieve")) - 1))),  # corrections were needed
    "evidence_changed": (-1, _evidence_changed),
    "web_used": (-1, lambda r: float(bool(r.state.get("web_searched")))),
    "opposite": (-1, lambda r: float(bool(r.answer and conflicts(r.state.get("question", ""), r.answer)))),
    "contradiction": (-1, lambda r: float(r.contradicted)),
    "sources": (+1, lambda r: float(len({s["doc_id"] for s in r.state.get("knowledge") or []}))),
    "retrievers_agree": (+1, _retrievers_agree),  # vector and keyword search both rank the answer's chunk high
    "names_found": (+1, _names_found),  # the cited evidence is about what the question names
    "grade_margin": (+1, _grade_margin),  # best minus second relevance grade: one clearly relevant passage
    # Distinct documents among the first round's passages: evidence scattered over many is less often one answer.
    "distinct_documents": (-1, lambda r: float(len({str(p["id"]).rsplit("#", 1)[0]
                                                     for p in r.first("retrieve", "passages")}))),
    "answer_term_coverage": (+1, lambda r: _last_grade(r, "term_coverage", 0.0)),  # quality.constraints' share
    "constraint_violations": (-1, lambda r: _last_grade(r, "violations", 0.0)),  # about another entity or qualifier
    "declined": (-1, lambda r: float(any(s.get("decision") == "no answer"
                                         for s in [*r.steps("first_draft"), *r.steps("generate")]))),
    "regenerations": (-1, lambda r: float(max(0, len(r.steps("generate")) - 1))),
    # Plain RAG's single-pass draft (nodes/first_draft.py), not a correction's: later rounds wrote more wrong
    # answers than right ones on the model backend's records.
    "plain_draft": (+1, lambda r: float(_drafted_by(r) == "first_draft")),
    # Names, numbers, identifiers and absolute words of the draft that no passage the run retrieved holds (nor the
    # question, as `question_terms` allows): counted, not a veto (text/rules.py).
    "rule_findings": (-1, lambda r: float(_last_check(r).get("findings") or 0)),
    # How sure the generator was of the words it wrote (the geometric mean of its reply's token probabilities), where
    # the server returned them; unmeasured otherwise (`unmeasured`): offline, or a server without logprobs.
    "answer_probability": (+1, lambda r: float(_draft_step(r.state).get("answer_probability") or 0.0)),
    # The local verifier's P(the cited passage answers the question with this draft): only with it on, and only in a
    # file fitted with it on (data/calibration/offline_verifier.json); unmeasured otherwise (`unmeasured`).
    "verifier": (+1, lambda r: _verified(r) or 0.0),
}

# Features computed by the same code whichever backend grades: retrieval, and pure text checks of the question, the
# answer and the evidence. The rest read a grader's scores or the loops they drive, which a chat model's graders
# distribute differently; a fit on these alone says how far the shipped file can carry to the model backend.
BACKEND_NEUTRAL = ("retrieval_top", "retrieval_margin", "retrievers_agree", "distinct_documents", "evidence_coverage",
                   "answer_coverage", "answer_type", "opposite", "contradiction", "names_found", "answer_term_coverage",
                   "constraint_violations")

# Features that count the question's own words in the evidence or the answer. The tuning sets' questions were written
# by people reading the passage (SQuAD; HaluEval from HotpotQA), so their wording follows it far more than a user's
# paraphrase does ("send back a pair of headphones" for "return an item"); a fit there learns to trust the overlap,
# and paraphrased questions with right answers then fall below the floor. The shipped fit leaves them out
# (benchmarks/calibration_fit.py); `selfcrag calibrate` on a user's own questions may take them.
QUESTION_WORDING = ("evidence_coverage", "answer_coverage", "answer_term_coverage")


# Features a grader's score supplies, by the node that grades. When that node's last step ran on a model fault the
# grader's placeholder score (a fail-open default) measures nothing: the calibrator then gives the feature no push
# either way (its standardised value is 0, the fitted mean), so a fault neither sinks nor lifts the confidence.
GRADED_BY = {"answer_relevance": "grade_answer", "groundedness": "check_hallucination",
             "unsupported": "check_hallucination", "rule_findings": "check_hallucination",
             "grade_top": "grade_documents", "grade_correct_share": "grade_documents",
             "grade_margin": "grade_documents"}  # fmt: skip


def unmeasured(state: State, draft: str = "") -> frozenset[str]:
    """The features whose grader failed in this run (see GRADED_BY), and `verifier` unless the local verifier
    measured `draft`."""
    last: dict[str, dict[str, Any]] = {}
    for step in state.get("trace") or []:
        last[str(step.get("node"))] = dict(step)
    # A grader that failed, or has not run yet (plain's draft is scored before any grading), measured nothing.
    failed = {name for name, node in GRADED_BY.items() if node not in last or last[node].get("error")}
    if _draft_step(state).get("answer_probability") is None:
        failed.add("answer_probability")
    if _verified(Run(state, strip_citations(draft), False)) is None:
        failed.add("verifier")
    return frozenset(failed)


def features(state: State, draft: str, contradicted: bool = False) -> dict[str, float]:
    """Every candidate feature of a finished run whose shown answer would be `draft`."""
    run = Run(state, strip_citations(draft), contradicted)
    return {name: round(float(read(run)), 4) for name, (_, read) in FEATURES.items()}


@dataclass(frozen=True)
class Calibrator:
    """p = sigmoid(bias + sum_i weight_i * (x_i - mean_i) / scale_i) over the named features."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    source: str = ""  # the file it came from
    ungrounded_drafts: str = "withheld"  # or "scored": see the module's docstring
    # Whether a correction round (grading, a regeneration, a rewrite) may run below the floor: false where the
    # file's tuning runs showed corrections losing more than they found (`corrections.pay`; see the docstring).
    corrections_pay: bool = True
    # The backend whose runs decided `corrections_pay` ("" = any): the offline verdict does not bind a model run
    # that borrows the offline fit for want of its own (for_settings).
    corrections_backend: str = ""

    @property
    def scores_ungrounded(self) -> bool:
        return self.ungrounded_drafts == "scored"

    def standardised(self, values: dict[str, float], unmeasured: frozenset[str] = frozenset()) -> list[float]:
        return [0.0 if n in unmeasured else (values[n] - m) / s
                for n, m, s in zip(self.features, self.mean, self.scale, strict=True)]  # fmt: skip

    def contributions(self, values: dict[str, float], unmeasured: frozenset[str] = frozenset()) -> dict[str, float]:
        """Each feature's push on the log-odds (weight x standardised value): negative pulls p down; none for a
        feature whose grader failed (`unmeasured`)."""
        return {n: round(w * z, 4) for n, w, z in zip(self.features, self.weights,
                                                       self.standardised(values, unmeasured), strict=True)}

    def probability(self, values: dict[str, float], unmeasured: frozenset[str] = frozenset()) -> float:
        return sigmoid(self.bias + sum(self.contributions(values, unmeasured).values()))


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def shipped(backend: str = "offline", verifier: bool = False, model: str = "") -> Path:
    """The shipped calibration for a backend: with the local verifier on, its own fit; on the model backend, the
    generator model's own fit (`model_<name>.json`, fitted on its tuning runs), else the backend's general one; the
    offline fit stands in where no other was fitted."""
    folder = Path(str(resources.files("selfcrag") / "data" / "calibration"))
    names = [*([f"{backend}_verifier"] if verifier else []), *([f"{backend}_{model_file(model)}"] if model else []),
             backend, "offline"]  # fmt: skip
    return next(folder / f"{n}.json" for n in names if (folder / f"{n}.json").is_file() or n == "offline")


def model_file(model: str) -> str:
    """A generator model's name as its calibration file names it: `openai:Qwen2.5-Coder-0.5B` -> qwen2.5-coder-0.5b
    (the provider is dropped: one model served by two providers writes alike)."""
    name = model.split(":", 1)[-1].strip().lower()
    return re.sub(r"[^a-z0-9._-]+", "-", name).strip("-.") or "unnamed"


UNGROUNDED_DRAFTS = ("withheld", "scored")
LARGEST_FILE = 1_000_000  # bytes; a fitted file is a few kilobytes


def load(path: str | Path) -> Calibrator:
    """The calibrator in `path`; CalibrationError (one line) when it is unreadable or malformed, not a regular file
    (a FIFO would block the reader, /dev/zero never ends) or larger than any calibration."""
    path = Path(path)
    try:
        found = os.stat(path)
    except OSError as exc:
        raise CalibrationError(f"calibration file {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(found.st_mode):
        raise CalibrationError(f"calibration file {path} is not a regular file")
    if found.st_size > LARGEST_FILE:
        raise CalibrationError(f"calibration file {path} has {found.st_size:,} bytes, more than a calibration has")
    return _load(str(path), found.st_mtime_ns)


def _read(path: str) -> str:
    """The file's text, opened without blocking and checked again once open (it may have been swapped since)."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(descriptor, "rb") as file:
        opened = os.fstat(file.fileno())
        if not stat.S_ISREG(opened.st_mode) or opened.st_size > LARGEST_FILE:
            raise ValueError("not a regular file of a calibration's size")
        return file.read(LARGEST_FILE + 1).decode("utf-8")


@lru_cache(maxsize=16)
def _load(path: str, stamp: int) -> Calibrator:  # `stamp`: a rewritten file is read again
    try:
        data = json.loads(_read(path))
        model = data["model"]
        names = tuple(str(n) for n in model["features"])
        numbers = [tuple(float(v) for v in model[key]) for key in ("mean", "scale", "weights")]
        bias = float(model["bias"])
        ungrounded = data.get("ungrounded_drafts", "withheld")
        corrections = data.get("corrections", {"pay": True})
        pay, decided_on = corrections["pay"], str(corrections.get("backend", ""))
    except OSError as exc:
        raise CalibrationError(f"calibration file {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CalibrationError(f"calibration file {path} is not a selfcrag calibration ({type(exc).__name__}: "
                               f"{exc})".splitlines()[0]) from None
    if unknown := [n for n in names if n not in FEATURES]:
        raise CalibrationError(f"calibration file {path} uses unknown features: {', '.join(unknown)}")
    if any(len(v) != len(names) for v in numbers) or any(s <= 0 for s in numbers[1]):
        raise CalibrationError(f"calibration file {path}: mean, scale and weights need one value per feature "
                               "(scales > 0)")
    if not all(math.isfinite(v) for v in (*numbers[0], *numbers[1], *numbers[2], bias)):
        raise CalibrationError(f"calibration file {path}: parameters must be finite numbers")
    if ungrounded not in UNGROUNDED_DRAFTS:
        raise CalibrationError(f"calibration file {path}: ungrounded_drafts must be one of "
                               f"{', '.join(UNGROUNDED_DRAFTS)}, not {str(ungrounded)[:40]!r}")
    if not isinstance(pay, bool):
        raise CalibrationError(f"calibration file {path}: corrections.pay must be true or false, not "
                               f"{str(pay)[:40]!r}")
    mean, scale, weights = numbers
    return Calibrator(names, mean, scale, weights, bias=bias, source=path, ungrounded_drafts=ungrounded,
                      corrections_pay=pay, corrections_backend=decided_on)


def for_settings(settings: Context) -> Calibrator:
    """The run's calibrator: the file the `calibration` setting names, else the shipped one for its backend."""
    backend = settings.backend if settings.backend != "auto" else ("model" if model_configured() else "offline")
    if settings.calibration:
        return _for_backend(load(settings.calibration), backend)
    model = settings.generator_model if backend == "model" else ""
    return _for_backend(load(shipped(backend, verifier=bool(settings.verifier), model=model)), backend)


@lru_cache(maxsize=16)
def _for_backend(calibrator: Calibrator, backend: str) -> Calibrator:
    """The calibrator as a run of `backend` uses it: a verdict that corrections do not pay holds only for the
    backend whose runs decided it; elsewhere nothing was measured, so correcting stays on (the default)."""
    if calibrator.corrections_pay or calibrator.corrections_backend in ("", backend):
        return calibrator
    return replace(calibrator, corrections_pay=True)
