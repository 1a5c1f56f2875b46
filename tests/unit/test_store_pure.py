"""Pure parts of the store: the review triggers (routing), durations and dates, percentiles, the monitor's
summary and a run's record."""

from __future__ import annotations

import pytest

from selfcrag.context import Context
from selfcrag.routing import review_triggers
from selfcrag.store.monitor import parse_duration, parse_moment, percentile, summarize
from selfcrag.store.runs import run_row

SCORES = {"context_relevance": 0.9, "groundedness": 0.95, "answer_relevance": 0.9}


@pytest.mark.parametrize(
    ("confidence", "scores", "expected"),
    [
        (0.90, SCORES, []),  # clear of the band, triad in agreement
        (0.74, SCORES, ["band"]),  # 0.02 above the minimum 0.72
        (0.69, SCORES, ["band"]),  # 0.03 below
        (0.90, SCORES | {"context_relevance": 0.6}, ["spread"]),  # 0.95 - 0.6 = 0.35 > 0.3
        (0.72, SCORES | {"answer_relevance": 0.5}, ["band", "spread"]),
    ],
)
def test_review_triggers(confidence, scores, expected):
    found = review_triggers(scores | {"confidence": confidence}, 0.72, Context(human_review=True))
    assert [("band" if "within" in r else "spread") for r in found] == expected


def test_review_triggers_need_human_review_and_follow_their_settings():
    doubtful = SCORES | {"context_relevance": 0.2, "confidence": 0.72}
    assert review_triggers(doubtful, 0.72, Context()) == []
    assert review_triggers(doubtful, 0.72, Context(human_review=True, review_band=0.0, review_spread=1.0)) != []
    assert review_triggers(doubtful | {"confidence": 0.73}, 0.72,
                           Context(human_review=True, review_band=0.0, review_spread=1.0)) == []  # fmt: skip


def test_durations_and_moments():
    assert parse_duration("90s") == 90 and parse_duration("1h") == 3600 and parse_duration("7d") == 7 * 86400
    assert parse_moment("2025-01-31") == 1738281600.0
    assert parse_moment("30d", now=1_000_000_000) == 1_000_000_000 - 30 * 86400
    for bad in ("", "7 days", "-1h"):
        with pytest.raises(ValueError, match="not a duration"):
            parse_duration(bad)


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.95)) == (50.0, 95.0)
    assert percentile([], 0.5) is None and percentile([7.0], 0.95) == 7.0


def test_summary_of_records():
    rows = [
        {"created_at": 10.0, "thread_id": "a", "question": "q1", "decision": "answer", "passed": 1, "below": "",
         "confidence": 0.9, "context_relevance": 0.9, "groundedness": 1.0, "answer_relevance": 0.8,
         "latency_ms": 100.0, "llm_calls": 2, "tokens": 50, "domain": "general"},
        {"created_at": 20.0, "thread_id": "", "question": "q2", "decision": "abstain", "passed": 0,
         "below": "groundedness", "confidence": 0.2, "context_relevance": 0.3, "groundedness": 0.1,
         "answer_relevance": 0.4, "latency_ms": 300.0, "llm_calls": 1, "tokens": 10, "domain": "legal"},
    ]
    summary = summarize(rows, 0.0, 30.0)
    assert summary["runs"] == 2 and summary["pass_rate"] == 0.5
    assert summary["avg_scores"]["groundedness"] == 0.55 and summary["decisions"] == {"answer": 1, "abstain": 1}
    assert summary["latency_ms"] == {"p50": 100.0, "p95": 300.0, "mean": 200.0}
    assert summary["lowest"][0]["question"] == "q2" and summary["lowest"][0]["weakest"] == 0.1
    assert summarize([], 0.0, 1.0)["pass_rate"] is None


def test_a_record_is_keyed_by_thread_and_start_so_the_review_updates_it():
    state = {"trace": [{"node": "prepare", "question": "q", "started": 100.0}], "question": "q", "llm_calls": 3}
    update = {"decision": "human_review", "scores": SCORES, "confidence": 0.7,
              "quality": {"passed": False, "below": ["confidence"]}}  # fmt: skip
    row = run_row(state, update, "general", "t-1")
    assert row["run_key"] == "t-1:100.0" and row["created_at"] == 100.0 and row["latency_ms"] > 0
    assert (row["passed"], row["below"], row["llm_calls"], row["groundedness"]) == (0, "confidence", 3, 0.95)
    assert run_row(state, {"decision": "answer"}, None, "t-1")["run_key"] == row["run_key"]
    assert run_row(state, update, "general", "")["run_key"] != run_row(state, update, "general", "")["run_key"]
