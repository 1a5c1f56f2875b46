"""Metrics of a system on one question set: pure functions, no I/O.

y (`correct`) is 1 when the question is answerable and the shown answer contains a gold answer; an answer shown to an
unanswerable question is wrong, and an abstention shows nothing, so both are 0. Confidence is judged against y:
- AUROC: the chance that a right answer has a higher confidence than a wrong one (ties count half); 0.5 is chance.
- Risk-coverage: answer the most confident questions first; at coverage k/n the risk is the error rate among those
  k. Tied confidences cannot be split by a threshold, so a tie enters as a whole, and AURC (the mean risk over
  k = 1..n) spreads a tie's errors evenly over it: the expected value under a random order within the tie.
- ECE: 10 equal-width bins of confidence; the weighted mean of |mean confidence - accuracy| over the bins.

The decisions themselves (what a system showed, not how it ranked) are judged as selective answering:
- coverage: the share of questions answered; selective accuracy: the share right among them.
- effective reliability: Phi_c = (right - c * wrong) / n. An abstention scores 0, a right answer shown +1, a wrong
  one -c: c = 1 when a wrong answer costs as much as a right one gains, c = 3 for a cautious deployment. Answering
  everything with plain RAG's errors can score below 0; abstaining on everything scores exactly 0.
- risk at coverage 0.5 / 0.8: the error rate among the most confident half (four fifths) of the questions, what
  a floor that answers that many would show (a tie at the cut is spread evenly, as in AURC).
- hit@k: where a question names its gold documents, the share whose first retrieval round found one of them.

AUROC is given three ways. Over all questions (`auroc`) an abstention enters as a wrong answer of its confidence,
so abstaining raises it; among answers shown (`auroc_shown`) it says whether the confidence ranks what a user sees;
among drafts (`auroc_drafts`: every question with a draft, shown or withheld, labelled by whether that draft is
right) whether it ranks what the decision chose from. `right_drafts` counts questions where any draft (any
candidate, where the record lists them) is right: what no floor can add to. Drafts: paired.py.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from selfcrag.evaluation.paired import any_right, best_draft, differences, right, selective

ANSWERED = ("answer", "answer_with_caveat")
FIXED_RISKS = (0.05, 0.1, 0.2, 0.3)
FIXED_COVERAGES = (0.5, 0.8)
COSTS = (0, 1, 3)  # the c of effective reliability Phi_c reported for every system (Phi_0: right answers / n)
BINS = 10


def auroc(confidence: Sequence[float], correct: Sequence[bool]) -> float | None:
    """Area under the ROC curve of `confidence` for `correct` (Mann-Whitney U with mid-ranks for ties); None
    when every question is right or every one is wrong, where it is undefined."""
    positives = sum(1 for y in correct if y)
    negatives = len(correct) - positives
    if not positives or not negatives:
        return None
    order = sorted(range(len(confidence)), key=lambda i: confidence[i])
    rank_sum, start = 0.0, 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and confidence[order[end + 1]] == confidence[order[start]]:
            end += 1
        mid_rank = (start + end) / 2 + 1  # ranks are 1-based; a tie shares the mean of its ranks
        rank_sum += mid_rank * sum(1 for i in order[start : end + 1] if correct[i])
        start = end + 1
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def _tie_groups(confidence: Sequence[float], correct: Sequence[bool]) -> list[tuple[int, int]]:
    """(size, errors) of each group of equal confidence, most confident first."""
    counts: dict[float, list[int]] = {}
    for value, y in zip(confidence, correct, strict=True):
        group = counts.setdefault(value, [0, 0])
        group[0] += 1
        group[1] += 0 if y else 1
    return [(size, errors) for _, (size, errors) in sorted(counts.items(), reverse=True)]


def risk_coverage(confidence: Sequence[float], correct: Sequence[bool]) -> list[tuple[float, float]]:
    """(coverage, risk) at every confidence threshold, from the most confident tie group to all questions."""
    points, taken, errors = [], 0, 0
    for size, wrong in _tie_groups(confidence, correct):
        taken, errors = taken + size, errors + wrong
        points.append((taken / len(confidence), errors / taken))
    return points


def aurc(confidence: Sequence[float], correct: Sequence[bool]) -> float | None:
    """Area under the risk-coverage curve: the mean over k = 1..n of the risk among the k most confident."""
    if not confidence:
        return None
    total, taken, errors = 0.0, 0, 0
    for size, wrong in _tie_groups(confidence, correct):
        for j in range(1, size + 1):
            total += (errors + wrong * j / size) / (taken + j)
        taken, errors = taken + size, errors + wrong
    return total / len(confidence)


def coverage_at_risk(confidence: Sequence[float], correct: Sequence[bool], risk: float) -> float:
    """The largest coverage a confidence threshold reaches with an error rate at most `risk` (0 if none does)."""
    return max((c for c, r in risk_coverage(confidence, correct) if r <= risk + 1e-12), default=0.0)


def risk_at_coverage(confidence: Sequence[float], correct: Sequence[bool], coverage: float) -> float | None:
    """The error rate among the ceil(coverage * n) most confident questions; a tie that straddles the cut
    contributes its share of errors in proportion to how much of it is taken."""
    wanted = math.ceil(round(coverage * len(confidence), 9))
    if not wanted:
        return None
    taken, errors = 0, 0.0
    for size, wrong in _tie_groups(confidence, correct):
        part = min(size, wanted - taken)
        taken, errors = taken + part, errors + wrong * part / size
        if taken == wanted:
            break
    return errors / taken


def effective_reliability(right: int, wrong: int, questions: int, cost: float) -> float | None:
    """Phi_c = (right - c * wrong) / n: what the decisions earned when a wrong answer costs c right ones."""
    return (right - cost * wrong) / questions if questions else None


def reliability(confidence: Sequence[float], correct: Sequence[bool], bins: int = BINS) -> list[dict[str, Any]]:
    """Per equal-width confidence bin: its bounds, count, mean confidence and accuracy (None when empty)."""
    members: list[list[int]] = [[] for _ in range(bins)]
    for i, value in enumerate(confidence):
        clamped = min(max(value, 0.0), 1.0)
        members[min(int(math.floor(round(clamped * bins, 9))), bins - 1)].append(i)
    table = []
    for b, inside in enumerate(members):
        table.append({"low": b / bins, "high": (b + 1) / bins, "count": len(inside),
                      "mean_confidence": sum(confidence[i] for i in inside) / len(inside) if inside else None,
                      "accuracy": sum(1 for i in inside if correct[i]) / len(inside) if inside else None})
    return table


def ece(confidence: Sequence[float], correct: Sequence[bool], bins: int = BINS) -> float | None:
    """Expected calibration error over equal-width bins."""
    if not confidence:
        return None
    return float(sum(row["count"] / len(confidence) * abs(row["mean_confidence"] - row["accuracy"])
                     for row in reliability(confidence, correct, bins) if row["count"]))  # fmt: skip


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between the two nearest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(math.floor(position))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def summarise(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Every metric of one system's records (one per question)."""
    rows = list(records)
    answerable = [r for r in rows if not r["is_impossible"]]
    impossible = [r for r in rows if r["is_impossible"]]
    answered = [r for r in rows if r["answered"]]
    confidence = [float(r["confidence"]) for r in rows]
    correct = [bool(r["correct"]) for r in rows]
    latency = [float(r["latency_ms"]) for r in rows]
    cpu = [float(r["cpu_ms"]) for r in rows]
    server = [float(r["server_cpu_ms"]) for r in rows if r.get("server_cpu_ms") is not None]
    right_shown = sum(1 for r in rows if r["correct"])
    wrong = len(answered) - right_shown
    drafts = [(r, d) for r in rows if (d := best_draft(r)) is not None]
    hits = [bool(r["gold_hit"]) for r in rows if r.get("gold_hit") is not None]
    calls = sum(int(r["llm_calls"]) for r in rows)
    tokens = sum(int(r["tokens"]) for r in rows)
    return {
        "questions": len(rows),
        "answerable": len(answerable),
        "unanswerable": len(impossible),
        "answerable_accuracy": _share(sum(1 for r in answerable if r["correct"]), len(answerable)),
        "unanswerable_answered": _share(sum(1 for r in impossible if r["answered"]), len(impossible)),
        "abstained": _share(len(rows) - len(answered), len(rows)),
        "coverage": _share(len(answered), len(rows)),
        "right": right_shown,
        "wrong": wrong,
        "precision_when_answered": _share(right_shown, len(answered)),  # selective accuracy
        "effective_reliability": {str(c): effective_reliability(right_shown, wrong, len(rows), c) for c in COSTS},
        "risk_at_coverage": {f"{c:g}": risk_at_coverage(confidence, correct, c) for c in FIXED_COVERAGES},
        "auroc": auroc(confidence, correct),
        "auroc_shown": auroc([float(r["confidence"]) for r in answered], [bool(r["correct"]) for r in answered]),
        "auroc_drafts": auroc([d["confidence"] for _, d in drafts], [right(r, d["answer"]) for r, d in drafts]),
        "drafted": len(drafts),
        "right_drafts": sum(1 for r in rows if any_right(r)),
        "aurc": aurc(confidence, correct),
        "coverage_at_risk": {f"{risk:g}": coverage_at_risk(confidence, correct, risk) for risk in FIXED_RISKS},
        "ece": ece(confidence, correct),
        "hit_at_k": _share(sum(hits), len(hits)),
        "latency_ms": {"p50": percentile(latency, 50), "p95": percentile(latency, 95)},
        "cpu_ms": {"p50": percentile(cpu, 50), "p95": percentile(cpu, 95)},
        # A local model server's CPU per question (`selfcrag eval --server-pid`); None when it was not measured.
        "server_cpu_ms": {"p50": percentile(server, 50), "p95": percentile(server, 95),
                          "mean": sum(server) / len(server) if server else None},
        # Replayed calls (selfcrag eval --replay) count as calls, but took no model time.
        "llm_calls": {"total": calls, "per_question": _share(calls, len(rows)),
                      "replayed": sum(int(r.get("replayed_calls") or 0) for r in rows)},
        "tokens": {"total": tokens, "per_question": _share(tokens, len(rows))},
        "decisions": dict(Counter(str(r["decision"]) for r in rows)),
        "errors": sum(1 for r in rows if r.get("error")),
        "faults_by_node": faults_by_node(rows),
    }


def faults_by_node(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per graph node over a system's records (signals.node_faults): its steps, the steps that hit a fault, the
    parse failures among them, and both as rates of the node's steps. Nodes that never faulted are left out."""
    totals: dict[str, list[int]] = {}
    for row in rows:
        for node, counts in ((row.get("signals") or {}).get("node_faults") or {}).items():
            total = totals.setdefault(node, [0, 0, 0])
            for i, count in enumerate(counts[:3]):
                total[i] += int(count)
    return {node: {"steps": steps, "faults": faults, "parse_failures": parse,
                   "fault_rate": faults / steps, "parse_failure_rate": parse / steps}
            for node, (steps, faults, parse) in sorted(totals.items()) if faults}  # fmt: skip


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def compare(systems: dict[str, dict[str, Any]], system: str = "selfcrag", baseline: str = "plain") -> dict[str, Any]:
    """selfcrag / plain ratios: unanswerable questions answered (the hallucination rate on SQuAD 2.0), right answers
    shown, and latency."""
    if system not in systems or baseline not in systems:
        return {}
    ours, theirs = systems[system], systems[baseline]
    return {
        "unanswerable_answered": _ratio(ours["unanswerable_answered"], theirs["unanswerable_answered"]),
        "right_shown": _ratio(ours["right"], theirs["right"]),
        "right_drafts": _ratio(ours["right_drafts"], theirs["right"]),  # what a perfect choice could show
        "latency_p50": _ratio(ours["latency_ms"]["p50"], theirs["latency_ms"]["p50"]),
        "latency_p95": _ratio(ours["latency_ms"]["p95"], theirs["latency_ms"]["p95"]),
        "cpu_p50": _ratio(ours["cpu_ms"]["p50"], theirs["cpu_ms"]["p50"]),
    }


def by_system(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records grouped by their `system`, in the order systems first appear."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        grouped.setdefault(record["system"], []).append(record)
    return grouped


def metrics(records: Iterable[dict[str, Any]], selective_floor: float | None = None) -> dict[str, Any]:
    """metrics.json: per system every metric, the selfcrag/plain ratios, and each system's differences to plain with
    their paired bootstrap intervals. With `selective_floor` and plain's records, selective plain (plain with that
    floor on its own confidence) is a system too."""
    grouped = by_system(records)
    if selective_floor is not None and "plain" in grouped:
        grouped["selective_plain"] = selective(grouped["plain"], selective_floor)
    systems = {name: summarise(rows) for name, rows in grouped.items()}
    paired = {name: differences(rows, grouped["plain"]) for name, rows in grouped.items()
              if name != "plain" and "plain" in grouped}  # fmt: skip
    return {"systems": systems, "ratios": compare(systems), "differences_to_plain": paired}
