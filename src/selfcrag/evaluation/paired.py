"""What a record's drafts were, selective plain RAG, and paired bootstrap intervals of a system's difference to plain.

- Drafts: a record's candidates are `detail["candidates"]` where the graph lists them (dicts with `answer`,
  `confidence`, `shown`), else the one draft it would show (`draft`; for plain RAG, its answer). The draft a system
  would show is the shown candidate, else the most confident one; a question without any draft is not a ranked
  answer, so it is left out of the AUROC among drafts.
- Selective plain: plain RAG that answers only when its own confidence (its best retrieval score) reaches a floor,
  fitted on a tuning evaluation's plain records to maximise Phi_c at the run's cost (data/selective_plain.json,
  benchmarks/selective_plain_floor.py). The baseline a user builds in ten lines; the same calls and latency as plain.
- Paired bootstrap: both systems answered the same questions, so the questions are resampled together (2000 times,
  seeded) and the 2.5th and 97.5th percentiles of the difference are its 95% interval.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np

from selfcrag.evaluation.questions import contains_gold

RESAMPLES = 2000
SEED = 0


def candidates(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's drafts as (answer, confidence, shown), empty when it had none."""
    listed = (record.get("detail") or {}).get("candidates")
    if isinstance(listed, list) and listed:
        return [{"answer": str(c.get("answer") or ""), "confidence": float(c.get("confidence") or 0.0),
                 "shown": bool(c.get("shown"))} for c in listed if isinstance(c, dict) and c.get("answer")]  # fmt: skip
    draft = str(record.get("draft") or "") if "draft" in record else str(record.get("answer") or "")
    if not draft:
        return []
    return [{"answer": draft, "confidence": float(record.get("confidence") or 0.0), "shown": bool(record["answered"])}]


def right(record: dict[str, Any], answer: str) -> bool:
    """Whether `answer` would be judged right for the record's question."""
    return bool(answer) and not record["is_impossible"] and contains_gold(answer, record["answers"])


def best_draft(record: dict[str, Any]) -> dict[str, Any] | None:
    """The draft the system would show: the shown candidate, else the most confident; None without a draft."""
    drafts = candidates(record)
    if not drafts:
        return None
    return next((d for d in drafts if d["shown"]), max(drafts, key=lambda d: d["confidence"]))


def any_right(record: dict[str, Any]) -> bool:
    return any(right(record, d["answer"]) for d in candidates(record))


def selective(plain: Sequence[dict[str, Any]], floor: float) -> list[dict[str, Any]]:
    """Plain RAG's records with a floor on its confidence: below it, an abstention."""
    rows = []
    for record in plain:
        shown = bool(record["answered"]) and float(record["confidence"]) >= floor
        rows.append({**record, "system": "selective_plain", "answered": shown, "correct": bool(record["correct"])
                     and shown, "decision": record["decision"] if shown else "abstain",
                     "draft": str(record.get("answer") or "")})  # fmt: skip
    return rows


def best_floor(confidence: Sequence[float], correct: Sequence[bool], answered: Sequence[bool], cost: float) -> float:
    """The floor on confidence that maximises Phi_cost = (right - cost * wrong) / n over these records; among equal
    Phi, the lowest (it shows the most right answers). 0 when no record answered."""
    shown = sorted({float(c) for c, a in zip(confidence, answered, strict=True) if a})
    best, chosen = -np.inf, 0.0
    for floor in [0.0, *shown, np.inf]:
        score = sum((1.0 if y else -cost) for c, y, a in zip(confidence, correct, answered, strict=True)
                    if a and c >= floor)  # fmt: skip
        if score > best + 1e-12:
            best, chosen = score, float(floor)
    return chosen if np.isfinite(chosen) else 1e9


def selective_floors() -> dict[str, Any]:
    """data/selective_plain.json: the fitted floors per backend and cost, with their provenance."""
    text = (resources.files("selfcrag") / "data" / "selective_plain.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def fitted_floor(backend: str, cost: float) -> tuple[float, float] | None:
    """(floor, the cost it was fitted for) for a backend: the stored cost nearest `cost`; None when none was fitted."""
    floors = (selective_floors().get("floors") or {}).get(backend) or {}
    if not floors:
        return None
    nearest = min(floors, key=lambda c: abs(float(c) - cost))
    return float(floors[nearest]), float(nearest)


def _outcomes(rows: Sequence[dict[str, Any]]) -> np.ndarray:
    """Per question: [right, wrong, answered] as 0/1."""
    return np.array([[bool(r["correct"]), bool(r["answered"]) and not r["correct"], bool(r["answered"])]
                     for r in rows], dtype=float).reshape(len(rows), 3)  # fmt: skip


def differences(ours: Sequence[dict[str, Any]], theirs: Sequence[dict[str, Any]], costs: Sequence[float] = (1, 3),
                resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, dict[str, float]]:  # fmt: skip
    """Each difference ours - theirs over the questions both answered, with its paired bootstrap 95% interval:
    Phi_c for each cost, right answers shown (a count) and coverage (a share)."""
    by_id = {str(r.get("id", i)): r for i, r in enumerate(theirs)}  # a record without an id pairs by position
    pairs = [(r, by_id[key]) for i, r in enumerate(ours) if (key := str(r.get("id", i))) in by_id]
    if not pairs:
        return {}
    a, b = _outcomes([p[0] for p in pairs]), _outcomes([p[1] for p in pairs])
    n = len(pairs)
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))

    def measures(x: np.ndarray) -> dict[str, np.ndarray]:
        """Each measure over the last-but-one axis (questions), for the full set or every resample at once."""
        phis = {f"phi_{c:g}": (x[..., 0] - c * x[..., 1]).mean(axis=-1) for c in costs}
        return {**phis, "right": x[..., 0].sum(axis=-1), "coverage": x[..., 2].mean(axis=-1)}

    point, resampled = measures(a - b), measures(a[picks] - b[picks])
    return {name: {"difference": round(float(point[name]), 4),
                   "low": round(float(np.percentile(resampled[name], 2.5)), 4),
                   "high": round(float(np.percentile(resampled[name], 97.5)), 4)} for name in point}  # fmt: skip
