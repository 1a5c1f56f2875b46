"""The signals a run offers cheaply, flattened for the calibration work that will fit on the records.

Everything here is read from the graph's output and trace (or, for plain RAG, from its passages): no extra model
call, no extra retrieval. Signals that do not depend on the dataset are preferred (retrieval margin, grades, support,
whether a correction changed the evidence); see shared/notes/calibration.md.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from selfcrag.offline.comparison import is_verdict

TOP = 3  # retrieval scores kept per record: the best passages carry the signal, the tail is noise
# How a step's error reads when the model answered but its reply could not be used (llm/structured.py writes
# "malformed reply"; the OpenAI client raises LengthFinishReasonError when a structured reply hit its token cap):
# a parse failure, as opposed to a call that failed (timeout, refused, spent budget).
PARSE_FAILURES = ("malformed reply", "LengthFinishReasonError", "no verdict")


def retrieval_signals(scores: list[float]) -> dict[str, Any]:
    """Top retrieval scores and the margin between the best two passages."""
    ranked = sorted(scores, reverse=True)
    return {"retrieval_top": [round(s, 4) for s in ranked[:TOP]],
            "retrieval_margin": round(ranked[0] - ranked[1], 4) if len(ranked) > 1 else (ranked[0] if ranked else 0.0),
            "passages": len(ranked)}  # fmt: skip


def _steps(trace: list[dict[str, Any]], node: str) -> list[dict[str, Any]]:
    return [step for step in trace if step.get("node") == node]


def graph_signals(output: dict[str, Any]) -> dict[str, Any]:
    """Signals of one graph run, from its output and trace."""
    trace = output.get("trace") or []
    retrievals = _steps(trace, "retrieve")
    rounds = [[p["id"] for p in step.get("passages") or []] for step in retrievals]
    first_scores = [float(p["score"]) for p in (retrievals[0].get("passages") or [])] if retrievals else []
    gradings = _steps(trace, "grade_documents")
    first_grades = gradings[0].get("grades") or [] if gradings else []
    checks = _steps(trace, "check_hallucination")
    answer_grades = _steps(trace, "grade_answer")
    explanation = output.get("confidence_explanation") or {}
    closing = (_steps(trace, "finalize") or [{}])[-1]
    return {
        **retrieval_signals(first_scores),
        "grade_top": round(max((float(g["score"]) for g in first_grades), default=0.0), 4),
        "grade_counts": dict(Counter(str(g["label"]) for g in first_grades)),
        "crag_actions": [str(step.get("decision")) for step in gradings],
        "retrieval_rounds": len(retrievals),
        "rewrites": len(_steps(trace, "rewrite_query")),
        "web_searches": len(_steps(trace, "web_search")),
        # A correction that retrieved the same passages again changed nothing the generator could use.
        "evidence_changed": any(set(ids) != set(rounds[0]) for ids in rounds[1:]),
        # Strips each refinement (or web search) added to the run's evidence, in order; rounds that added any.
        "evidence_added": [int(step.get("evidence_added", 0)) for step in trace
                           if step.get("node") in ("refine", "web_search") and "evidence_added" in step],
        "rounds_useful": sum(1 for step in trace if step.get("node") in ("refine", "web_search")
                             and int(step.get("evidence_added", 0)) > 0),
        "stopped_nothing_new": any(step.get("node") == "retrieve" and step.get("new") == 0 for step in retrievals[1:])
        or any(step.get("node") == "rewrite_query" and step.get("decision") == "stop" for step in trace),
        # The draft opens with a bare yes/no verdict the evidence decided (offline/comparison.py).
        "yes_no_decided": any(is_verdict(str(step.get("draft") or "").split(".")[0].split("。")[0])
                              for step in _steps(trace, "finalize")),
        "generations": len(_steps(trace, "generate")),
        "drafts": sum(1 for step in _steps(trace, "generate") if step.get("decision") == "draft"),
        # Drafts written after the strips alone could not answer (generation read whole passages:
        # offline/drafting.py), the grounded drafts finalize chose from, and the round of the one it showed
        # (quality/drafts.py).
        "whole_passage_drafts": sum(1 for step in _steps(trace, "generate") if step.get("whole_passages")),
        "drafts_kept": len(closing.get("candidates") or []),
        "shown_draft_round": next((d["round"] for d in closing.get("candidates") or [] if d.get("shown")), 0),
        "grounded": checks[-1].get("decision") == "grounded" if checks else None,
        "unsupported": len(checks[-1].get("unsupported") or []) if checks else 0,
        "useful": answer_grades[-1].get("decision") == "useful" if answer_grades else None,
        # The answer's constraint violations and question-term coverage (quality.constraints), for calibration.
        "constraint_violations": answer_grades[-1].get("violations") if answer_grades else None,
        "answer_term_coverage": answer_grades[-1].get("term_coverage") if answer_grades else None,
        "confidence_signals": explanation.get("signals", {}),
        "weakest_signal": explanation.get("weakest", ""),
        "below_minimum": (output.get("quality") or {}).get("below", []),
        "contradictions": len(output.get("contradictions") or []),
        "citations": len(output.get("citations") or []),
        "cited_documents": len({c["doc_id"] for c in output.get("citations") or []}),
        "model_faults": sum(1 for step in trace if step.get("error")),
        "node_faults": node_faults(trace),
    }


def node_faults(trace: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Per node of the run: [steps, steps with a fault, of which parse failures]. On the model backend each node
    is one role's call, so the metrics can give every role's parse-failure rate."""
    counts: dict[str, list[int]] = {}
    for step in trace:
        row = counts.setdefault(str(step.get("node")), [0, 0, 0])
        error = str(step.get("error") or "")
        row[0] += 1
        row[1] += bool(error)
        row[2] += any(mark in error for mark in PARSE_FAILURES)
    return counts


def trimmed_trace(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace without what the record keeps elsewhere (the draft) or what is long and wordy (each grade's
    reason), so a few hundred records stay small enough to commit."""
    kept = []
    for step in trace:
        step = {key: value for key, value in step.items() if key != "draft"}
        if "grades" in step:
            step["grades"] = [{k: v for k, v in grade.items() if k != "reason"} for grade in step["grades"]]
        kept.append(step)
    return kept
