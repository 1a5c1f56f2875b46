"""Fit the calibrator: logistic regression of "the draft the graph would show is right" on the run's features.

Labelled questions run through the graph (`evaluation/run.py` records every run, with the draft and every candidate
feature of `quality/calibration.py`); the label is 1 when the question is answerable and the draft contains a gold
answer. A run with no draft to show is left out of the fit: its probability is 0 by definition.

The fit is Newton's method (iteratively reweighted least squares) with an L2 penalty on standardised features, in
numpy. Features are chosen greedily by grouped cross-validation: questions of one group (an article,
`context_title`) are never on both sides of a fold, so the fit is judged on text it has not seen. The cross-validated
AUROC, ECE and AURC of the fit, and of the confidence the records were produced with, go into the file with the
data's provenance.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from selfcrag.errors import CalibrationDataError
from selfcrag.evaluation.metrics import aurc, auroc, ece, effective_reliability
from selfcrag.evaluation.provenance import git_commit, sha256
from selfcrag.evaluation.questions import contains_gold
from selfcrag.evaluation.run import measure
from selfcrag.quality.calibration import FEATURES, for_settings
from selfcrag.quality.thresholds import show_floor

if TYPE_CHECKING:
    from selfcrag.evaluation.run import Systems

L2 = 1.0  # penalty on the standardised weights: a few hundred questions fit a handful of features, not noise
MAX_FEATURES = 8
# Cross-validated log-loss a new feature must save per question to be taken: at least this, and at least 1/n (a
# parameter's worth, as in AIC), so a small question set does not pick noise that happened to help its folds.
MIN_GAIN = 0.002
MIN_QUESTIONS = 20


def candidates_of(record: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The candidates the record's run scored (its `detail["candidates"]`, else finalize's trace step; each with its
    answer and features), or None for a record made before runs kept candidates."""
    closing: dict[str, Any] = next((s for s in reversed(record.get("trace") or []) if s.get("node") == "finalize"), {})
    found = (record.get("detail") or {}).get("candidates") or closing.get("candidates")
    if not isinstance(found, list) or not all(isinstance(c, dict) and "features" in c for c in found):
        return None
    return found


def rows_of(records: Sequence[dict[str, Any]], ungrounded: bool = False) -> list[dict[str, Any]]:
    """(features, label, group, confidence before) of each candidate the selfcrag records' runs may show: every
    draft is a candidate, and the fit learns P(right | the candidate's features) from all of them. Candidates come
    from the record's `detail["candidates"]`, else its finalize step. A question with no candidate it may show gives
    one undrafted row (its probability is 0 by definition); a record without candidates (an older run) gives one row
    for the draft it would show. `id` ties a row to its question, so `chosen` can decide each question again from
    the rows' probabilities. With `ungrounded` (a fit for a file that scores ungrounded drafts), a draft the check
    did not pass is a row too, unless an exact finding vetoed it (records made before candidates kept `vetoed`
    count none as vetoed). Each row keeps the features nothing measured (`unmeasured`), which the fit reads as the
    mean of those measured, as the calibrator does at run time."""
    rows = []
    for record in records:
        if record.get("system") != "selfcrag" or record.get("error"):
            continue
        # Folds hold whole articles; a question without one (HaluEval) is a group of its own, so mixing sets
        # never puts every untitled question into one fold.
        group = str(record.get("group") or "") or f"question {record.get('id', '')}"
        base = {"group": group, "source": str(record.get("source", "")),
                "impossible": bool(record["is_impossible"]), "id": str(record.get("id", ""))}
        candidates = candidates_of(record)
        if candidates is not None:
            showable = [c for c in candidates if c.get("showable", True) or (ungrounded and not c.get("vetoed"))]
            for candidate in showable:
                answer = str(candidate.get("answer") or "")
                right = bool(answer) and not record["is_impossible"] and contains_gold(answer, record["answers"])
                before, shown = float(candidate.get("confidence") or 0.0), bool(candidate.get("shown"))
                rows.append({**base, "features": candidate["features"], "label": right, "drafted": bool(answer),
                             "before": before, "shown": shown, "unmeasured": list(candidate.get("unmeasured") or [])})
            if not showable:
                rows.append({**base, "features": {}, "label": False, "drafted": False, "before": 0.0, "shown": False})
            continue
        values = ((record.get("detail") or {}).get("confidence_explanation") or {}).get("features")
        if not values:
            continue
        draft = str(record.get("draft") or "")
        right = bool(draft) and not record["is_impossible"] and contains_gold(draft, record["answers"])
        rows.append({**base, "features": values, "label": right, "drafted": bool(draft),
                     "before": float(record.get("confidence", 0.0)), "shown": True})
    return rows


def questions_in(rows: Sequence[dict[str, Any]]) -> int:
    """How many questions the rows are of (a question gives a row per candidate)."""
    return len({(r.get("source", ""), r.get("id", i)) for i, r in enumerate(rows)})


def chosen(rows: Sequence[dict[str, Any]], probability: Sequence[float]) -> tuple[list[dict[str, Any]], list[float]]:
    """Each question decided again from its candidates' probabilities, as `finalize` decides: the most probable
    candidate (the earlier on a tie: plain's draft first), or nothing drafted. One row and one probability per
    question, in the order questions first appear."""
    best: dict[str, int] = {}
    for i, row in enumerate(rows):
        key = f"{row['source']}/{row['id']}"
        if key not in best or (row["drafted"] and (not rows[best[key]]["drafted"] or
                                                   probability[i] > probability[best[key]])):  # fmt: skip
            best[key] = i
    picked = list(best.values())
    return [rows[i] for i in picked], [float(probability[i]) if rows[i]["drafted"] else 0.0 for i in picked]


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2) -> tuple[np.ndarray, float]:
    """Weights and bias minimising log-loss + l2/2 |w|^2 on standardised x (Newton steps; converges in ~10)."""
    n, d = x.shape
    design = np.hstack([x, np.ones((n, 1))])
    theta = np.zeros(d + 1)
    penalty = np.diag([l2] * d + [1e-6])  # the bias is barely penalised: it carries the base rate
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(design @ theta, -30, 30)))
        gradient = design.T @ (p - y) + penalty @ theta
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return theta[:-1], float(theta[-1])


def standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = x.std(axis=0)
    return x.mean(axis=0), np.where(scale > 1e-9, scale, 1.0)  # a constant feature keeps scale 1


def matrix(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> np.ndarray:
    """The rows' feature values; where a row's grader measured nothing (`unmeasured`: it failed, or had not run for
    plain's draft), the mean of the rows that measured it, so standardised it is 0, as the calibrator reads it."""
    x = np.array([[float(r["features"].get(n, 0.0)) for n in names] for r in rows]).reshape(len(rows), len(names))
    for j, name in enumerate(names):
        missing = np.array([name in (r.get("unmeasured") or ()) for r in rows], dtype=bool)
        if missing.any():
            x[missing, j] = x[~missing, j].mean() if (~missing).any() else 0.0
    return x


def folds(groups: Sequence[str], most: int = 8) -> list[np.ndarray]:
    """Test indices per fold: whole groups, spread over at most `most` folds. With fewer than three groups (a
    question file without `context_title`) each question is its own group."""
    names = sorted(set(groups))
    if len(names) < 3:
        names, groups = [str(i) for i in range(len(groups))], [str(i) for i in range(len(groups))]
    count = min(most, len(names))
    fold_of = {name: i % count for i, name in enumerate(names)}
    labels = np.array([fold_of[g] for g in groups])
    return [np.flatnonzero(labels == k) for k in range(count)]


def out_of_fold(rows: Sequence[dict[str, Any]], names: Sequence[str], l2: float = L2) -> np.ndarray:
    """Each drafted row's probability from a fit on the other folds (0 for rows without a draft)."""
    drafted = [i for i, r in enumerate(rows) if r["drafted"]]
    sub = [rows[i] for i in drafted]
    x, y = matrix(sub, names), np.array([r["label"] for r in sub], dtype=float)
    p = np.zeros(len(sub))
    for test in folds([r["group"] for r in sub]):
        train = np.setdiff1d(np.arange(len(sub)), test)
        mean, scale = standardise(x[train])
        weights, bias = fit_logistic((x[train] - mean) / scale, y[train], l2)
        p[test] = 1 / (1 + np.exp(-(((x[test] - mean) / scale) @ weights + bias)))
    full = np.zeros(len(rows))
    full[drafted] = p
    return full


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def scores(confidence: Sequence[float], rows: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    labels = [bool(r["label"]) for r in rows]
    values = [float(c) for c in confidence]
    return {"auroc": auroc(values, labels), "ece": ece(values, labels), "aurc": aurc(values, labels)}


def monotone(rows: Sequence[dict[str, Any]], names: Sequence[str], l2: float = L2) -> bool:
    """Whether every weight of a fit on all drafted rows has its feature's direction (FEATURES)."""
    drafted = [r for r in rows if r["drafted"]]
    x = matrix(drafted, names)
    mean, scale = standardise(x)
    weights, _ = fit_logistic((x - mean) / scale, np.array([r["label"] for r in drafted], dtype=float), l2)
    return all(FEATURES[n][0] * w >= 0 for n, w in zip(names, weights, strict=True))


# How many right drafts a floor still shows, from these probabilities (see `keeps_at`).
Keeps = Callable[[Sequence[float], Sequence[dict[str, Any]]], float]


def select(rows: Sequence[dict[str, Any]], candidates: Sequence[str], l2: float = L2,
           keeps: Keeps | None = None) -> list[str]:
    """Forward selection on grouped-CV log-loss over the drafted rows: add the feature that lowers it most, while
    it saves enough per question (MIN_GAIN) and every weight keeps its direction (a feature that only helps
    with a reversed sign is fitting the other features' overlap, which a new domain will not share). With
    `keeps`, a feature must also not make the abstain floor withhold more right answers: a lower log-loss can
    come from pushing already-withheld answers further down while the unanswerable ones that set the floor rise
    relative to the right ones, and the probability exists to decide."""
    drafted = [r for r in rows if r["drafted"]]
    y = np.array([r["label"] for r in drafted], dtype=float)
    chosen: list[str] = []
    best, needed = log_loss(np.full(len(y), y.mean()), y), max(MIN_GAIN, 1 / len(y))
    kept = 0.0
    while len(chosen) < MAX_FEATURES:
        trials: dict[str, tuple[float, float]] = {}
        for name in candidates:
            if name in chosen or not monotone(drafted, [*chosen, name], l2):
                continue
            p = out_of_fold(drafted, [*chosen, name], l2)
            share = keeps(p.tolist(), drafted) if keeps else 0.0
            if not chosen or share >= kept:
                trials[name] = (log_loss(p, y), share)
        if not trials:
            break
        name, (loss, share) = min(trials.items(), key=lambda item: item[1][0])
        if best - loss < needed:
            break
        chosen, best, kept = [*chosen, name], loss, share
    return chosen


def fit(rows: Sequence[dict[str, Any]], candidates: Sequence[str], l2: float = L2,
        keeps: Keeps | None = None) -> dict[str, Any]:
    """The calibration file's model and cross-validation sections, from labelled rows (`keeps`: see `select`)."""
    drafted = [r for r in rows if r["drafted"]]
    labels = {bool(r["label"]) for r in drafted}
    if len(drafted) < MIN_QUESTIONS or len(labels) < 2:
        raise CalibrationDataError(f"need at least {MIN_QUESTIONS} questions with a draft, some answered right and "
                                   f"some wrong; got {len(drafted)} drafts, "
                                   f"{sum(1 for r in drafted if r['label'])} right")
    names = select(rows, candidates, l2, keeps) or [candidates[0]]
    x = matrix(drafted, names)
    mean, scale = standardise(x)
    weights, bias = fit_logistic((x - mean) / scale, np.array([r["label"] for r in drafted], dtype=float), l2)
    after = out_of_fold(rows, names, l2)
    titled = any(not r["group"].startswith("question ") for r in rows)
    grouped = "context_title" if titled else "question"
    sources = sorted({r.get("source", "") for r in rows})
    by_source = {name: {"questions": sum(1 for r in rows if r.get("source", "") == name),
                        "right": sum(1 for r in rows if r["source"] == name and r["label"]),
                        **{when: scores([v for v, r in zip(values, rows, strict=True) if r["source"] == name],
                                        [r for r in rows if r["source"] == name])
                           for when, values in (("before", [r["before"] for r in rows]), ("after", list(after)))}}
                 for name in sources} if len(sources) > 1 else {}  # fmt: skip
    return {
        "model": {"features": list(names), "mean": _rounded(mean), "scale": _rounded(scale),
                  "weights": _rounded(weights), "bias": round(bias, 6)},
        "cross_validation": {
            "grouped_by": grouped, "folds": len(folds([r["group"] for r in drafted])),
            "questions": questions_in(rows), "candidates": len(rows), "drafted": len(drafted),
            "right": sum(1 for r in rows if r["label"]), "l2": l2,
            "before": scores([r["before"] for r in rows], rows), "after": scores(list(after), rows),
            **({"by_source": by_source} if by_source else {})},
        "out_of_fold": [float(p) for p in after],  # each row's cross-validated probability (not written)
    }  # fmt: skip


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 6) for v in values]


def provenance(files: Sequence[Path], rows: Sequence[dict[str, Any]], backend: str, command: str) -> dict[str, Any]:
    return {"data": [{"file": f.name, "sha256": sha256(f)} for f in files], "questions": questions_in(rows),
            "candidates": len(rows),
            "groups": len({r["group"] for r in rows}), "backend": backend, "git_commit": git_commit(),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"), "command": command}  # fmt: skip


def write(path: Path, fitted: dict[str, Any], origin: dict[str, Any], ungrounded_drafts: str = "withheld",
          corrections: dict[str, Any] | None = None) -> None:
    """The calibration file; `ungrounded_drafts` says which drafts the runs it was fitted on could show (the
    calibration they ran with says: quality/calibration.py), and so which drafts its probability is for.
    `corrections`: whether correcting below the floor paid on the tuning runs (`pay`, with what was measured)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"about": "selfcrag confidence calibration: p(the shown answer is right) = sigmoid(bias + sum of "
                     "weight * (feature - mean) / scale); see quality/calibration.py",
            "model": fitted["model"], "provenance": origin, "cross_validation": fitted["cross_validation"]}
    if ungrounded_drafts != "withheld":
        body["ungrounded_drafts"] = ungrounded_drafts
    if corrections is not None:
        body["corrections"] = corrections
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)  # a reader never sees half a file


def with_mode(calibration: Path, ungrounded_drafts: str, folder: Path) -> Path:
    """A copy of `calibration` in `folder` that says `ungrounded_drafts`: runs made with it keep the drafts a fit in
    that mode is for, and pick among them as the file's model does (quality/calibration.py)."""
    body = json.loads(calibration.read_text(encoding="utf-8"))
    path = folder / f"runs-calibration-{ungrounded_drafts}.json"
    path.write_text(json.dumps({**body, "ungrounded_drafts": ungrounded_drafts}), encoding="utf-8")
    return path


def calibrate(questions: Sequence[dict[str, Any]], systems: Systems, files: Sequence[Path], out: Path,
              command: str, progress: bool = True) -> dict[str, Any]:
    """Run the graph over labelled questions, fit, write the calibration file `out`; returns what was written
    (CalibrationDataError when the runs leave nothing to fit)."""
    records = []
    for done, question in enumerate(questions, 1):
        records.append(measure("selfcrag", systems.selfcrag, question))
        if progress and (done % 25 == 0 or done == len(questions)):
            print(f"calibrate: {done}/{len(questions)} questions run", file=sys.stderr)
    rows = rows_of(records)
    fitted = fit(rows, list(FEATURES))
    write(out, fitted, provenance(files, rows, systems.backend, command),
          for_settings(systems.settings).ungrounded_drafts)
    return fitted


def table(fitted: dict[str, Any]) -> str:
    """Grouped-CV AUROC / ECE / AURC of the confidence the runs had, and of the fit."""
    cv = fitted["cross_validation"]
    lines = [f"{cv['questions']} questions, {cv.get('candidates', cv['questions'])} candidates ({cv['drafted']} "
             f"drafts, {cv['right']} right), "
             f"{cv['folds']} folds grouped by {cv['grouped_by']}",
             f"{'':<26}{'AUROC':>8}{'ECE':>8}{'AURC':>8}"]
    for name, label in (("before", "before (current confidence)"), ("after", "after (this fit)")):
        row = cv[name]
        lines.append(f"{label:<26}" + "".join(f"{'—' if row[k] is None else format(row[k], '.3f'):>8}"
                                              for k in ("auroc", "ece", "aurc")))
    model = fitted["model"]
    lines.append("features: " + ", ".join(f"{n} {w:+.2f}" for n, w in zip(model["features"], model["weights"],
                                                                              strict=True)))
    return "\n".join(lines)


def source_table(fitted: dict[str, Any]) -> str:
    """The same figures per source domain ("" when the runs came from one)."""
    by_source = fitted["cross_validation"].get("by_source") or {}
    lines = [f"{'source':<10}{'questions':>10}{'right':>7}{'AUROC before/after':>20}{'ECE before/after':>18}"
             f"{'AURC before/after':>19}"] if by_source else []
    for name, row in by_source.items():
        cells = ["/".join("—" if row[w][k] is None else f"{row[w][k]:.3f}" for w in ("before", "after"))
                 for k in ("auroc", "ece", "aurc")]
        lines.append(f"{name:<10}{row['questions']:>10}{row['right']:>7}{cells[0]:>20}{cells[1]:>18}{cells[2]:>19}")
    return "\n".join(lines)


def _sources(rows: Sequence[dict[str, Any]]) -> list[str]:
    return sorted({r["source"] for r in rows})


def unanswerable_ratio(confidence: Sequence[float], rows: Sequence[dict[str, Any]], plain_answered: int,
                       floor: float) -> float:
    """Unanswerable questions the graph would answer with this floor, over those plain RAG answered."""
    shown = sum(1 for p, r in zip(confidence, rows, strict=True) if r["impossible"] and r["drafted"] and p >= floor)
    return shown / plain_answered if plain_answered else 0.0

def kept_right(confidence: Sequence[float], rows: Sequence[dict[str, Any]], floor: float) -> float:
    """The smallest share, over source domains, of the graph's right drafts that this floor still shows."""
    shares = []
    for source in _sources(rows):
        right = [p for p, r in zip(confidence, rows, strict=True)
                 if r["source"] == source and r["drafted"] and r["label"]]  # fmt: skip
        if right:
            shares.append(sum(1 for p in right if p >= floor) / len(right))
    return min(shares, default=1.0)


def keeps_at(floor: float) -> Keeps:
    """The share of right drafts still shown at `floor` (for `select`): the general cost's show floor."""

    def keeps(confidence: Sequence[float], rows: Sequence[dict[str, Any]]) -> float:
        return kept_right(confidence, rows, floor)

    return keeps


def cost_table(confidence: Sequence[float], rows: Sequence[dict[str, Any]], plain: dict[str, dict[str, int]],
               costs: Sequence[float]) -> list[dict[str, Any]]:
    """What each cost's show floor (p >= c / (1 + c), `quality/thresholds.py`) does on the tuning runs' cross-
    validated probabilities, per source: coverage, right and wrong shown, effective reliability Phi_1 and Phi_3
    beside plain RAG's (`plain`: its right, wrong and unanswerable-answered counts and questions per source), the
    right answers kept against plain's and the unanswerable questions answered against plain's. Nothing is chosen
    here: the costs are the presets' statement of what a deployment can afford."""
    table = []
    for cost in costs:
        floor = show_floor(cost)
        for source in _sources(rows):
            shown = [r for p, r in zip(confidence, rows, strict=True)
                     if r["source"] == source and r["drafted"] and p >= floor]  # fmt: skip
            right = sum(1 for r in shown if r["label"])
            theirs, n = plain[source], plain[source]["questions"]
            table.append({
                "cost": cost, "floor": floor, "source": source, "coverage": round(len(shown) / n, 4),
                "right": right, "wrong": len(shown) - right,
                **{f"phi_{c}": round(effective_reliability(right, len(shown) - right, n, c) or 0.0, 4) for c in (1, 3)},
                **{f"plain_phi_{c}": round(effective_reliability(theirs["right"], theirs["wrong"], n, c) or 0.0, 4)
                   for c in (1, 3)},
                "right_vs_plain": round(right / theirs["right"], 4) if theirs["right"] else None,
                "unanswerable_vs_plain": (round(sum(1 for r in shown if r["impossible"]) / theirs["unanswerable"], 4)
                                          if theirs["unanswerable"] else None)})  # fmt: skip
    return table


def most_cautious_cost(table: Sequence[dict[str, Any]], keep: float) -> float | None:
    """The highest cost whose floor still shows at least `keep` times plain RAG's right answers in every tuning
    source (`cost_table` rows): how the general preset's cost is chosen, so that caution costs few right answers
    in the source that loses most. None when no cost keeps that many."""
    costs = sorted({row["cost"] for row in table})
    kept = [c for c in costs if all((row["right_vs_plain"] or 0.0) >= keep for row in table if row["cost"] == c)]
    return max(kept, default=None)
