"""The evaluation's pure functions on examples small enough to compute by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfcrag.errors import QuestionFileError
from selfcrag.evaluation import metrics as m
from selfcrag.evaluation.questions import contains_gold, load_questions
from selfcrag.evaluation.report import winner

# Four questions, two right: 0.9 right, 0.8 right, 0.8 wrong (a tie across classes), 0.3 wrong.
CONFIDENCE = [0.9, 0.8, 0.8, 0.3]
CORRECT = [True, True, False, False]


def test_auroc_counts_a_tie_as_half():
    # Pairs (right, wrong): 0.9>0.8, 0.9>0.3, 0.8=0.8 (half), 0.8>0.3 -> 3.5 of 4.
    assert m.auroc(CONFIDENCE, CORRECT) == pytest.approx(0.875)


def test_auroc_extremes_and_undefined():
    assert m.auroc([0.1, 0.9], [False, True]) == 1.0
    assert m.auroc([0.9, 0.1], [False, True]) == 0.0
    assert m.auroc([0.5, 0.5, 0.5], [True, False, False]) == 0.5
    assert m.auroc([0.2, 0.7], [False, False]) is None  # no right answer: no ranking to judge


def test_risk_coverage_takes_a_tie_whole():
    assert m.risk_coverage(CONFIDENCE, CORRECT) == [(0.25, 0.0), (0.75, pytest.approx(1 / 3)), (1.0, 0.5)]


def test_aurc_spreads_a_tie_evenly():
    # k=1: 0; k=2: half the tie's one error over 2 = 0.25; k=3: 1/3; k=4: 2/4.
    assert m.aurc(CONFIDENCE, CORRECT) == pytest.approx((0 + 0.25 + 1 / 3 + 0.5) / 4)
    assert m.aurc([], []) is None


def test_coverage_at_risk():
    assert m.coverage_at_risk(CONFIDENCE, CORRECT, 0.0) == 0.25
    assert m.coverage_at_risk(CONFIDENCE, CORRECT, 0.2) == 0.25
    assert m.coverage_at_risk(CONFIDENCE, CORRECT, 0.4) == 0.75
    assert m.coverage_at_risk(CONFIDENCE, CORRECT, 0.5) == 1.0
    assert m.coverage_at_risk([0.9, 0.5], [False, True], 0.1) == 0.0  # the most confident answer is wrong


def test_ece_by_hand():
    # Bin 9: 0.95 and 0.9, mean 0.925, accuracy 0.5 -> 0.425 x 2/4; bin 1: 0.15 vs 0 -> 0.15 x 1/4;
    # bin 3: 0.35 vs 1 -> 0.65 x 1/4.
    assert m.ece([0.95, 0.9, 0.15, 0.35], [True, False, False, True]) == pytest.approx(0.2125 + 0.0375 + 0.1625)


def test_reliability_bin_edges():
    table = m.reliability([0.0, 0.7, 1.0, 0.69999], [True, True, False, False])
    assert [row["count"] for row in table] == [1, 0, 0, 0, 0, 0, 1, 1, 0, 1]
    assert table[9]["mean_confidence"] == 1.0 and table[9]["accuracy"] == 0.0
    assert table[1]["accuracy"] is None


def test_percentile_interpolates():
    assert m.percentile([40, 10, 30, 20], 50) == 25
    assert m.percentile([10, 20, 30, 40], 95) == pytest.approx(38.5)
    assert m.percentile([7], 95) == 7
    assert m.percentile([], 50) is None


def record(system: str, impossible: bool, answered: bool, correct: bool, confidence: float, ms: float = 10.0,
           calls: int = 0) -> dict:
    return {"system": system, "is_impossible": impossible, "answered": answered, "correct": correct,
            "confidence": confidence, "decision": "answer" if answered else "abstain", "latency_ms": ms,
            "cpu_ms": ms / 2, "llm_calls": calls, "tokens": 10 * calls}


def test_an_all_abstain_system():
    rows = [record("selfcrag", impossible, False, False, 0.2) for impossible in (False, False, True, True)]
    summary = m.summarise(rows)
    assert summary["answerable_accuracy"] == 0.0
    assert summary["unanswerable_answered"] == 0.0
    assert summary["abstained"] == 1.0
    assert summary["precision_when_answered"] is None  # nothing shown, nothing to be precise about
    assert summary["auroc"] is None
    assert summary["aurc"] == 1.0  # taken by its confidence, every question is a miss
    assert set(summary["coverage_at_risk"].values()) == {0.0}
    assert summary["ece"] == pytest.approx(0.2)
    assert summary["decisions"] == {"abstain": 4}


def test_summary_and_ratios():
    rows = [
        record("selfcrag", False, True, True, 0.9, ms=100, calls=2),
        record("selfcrag", True, True, False, 0.4, ms=300, calls=4),
        record("selfcrag", True, False, False, 0.1, ms=200, calls=2),
        record("plain", False, True, True, 0.8, ms=50, calls=1),
        record("plain", True, True, False, 0.7, ms=50, calls=1),
        record("plain", True, True, False, 0.9, ms=50, calls=1),
    ]
    result = m.metrics(rows)
    ours, theirs = result["systems"]["selfcrag"], result["systems"]["plain"]
    assert ours["unanswerable_answered"] == 0.5 and theirs["unanswerable_answered"] == 1.0
    assert ours["precision_when_answered"] == 0.5 and theirs["precision_when_answered"] == pytest.approx(1 / 3)
    assert ours["auroc"] == 1.0 and theirs["auroc"] == 0.5
    assert ours["llm_calls"] == {"total": 8, "per_question": pytest.approx(8 / 3), "replayed": 0}
    assert ours["latency_ms"]["p50"] == 200
    assert result["ratios"]["unanswerable_answered"] == 0.5
    assert result["ratios"]["latency_p50"] == 4.0
    assert m.metrics([r for r in rows if r["system"] == "selfcrag"])["ratios"] == {}  # no baseline, no ratio


def test_winner_of_a_row():
    assert winner({"selfcrag": 0.9, "plain": 0.8}, "higher") == "selfcrag"
    assert winner({"selfcrag": 0.9, "plain": 0.8}, "lower") == "plain"
    assert winner({"selfcrag": 0.5, "plain": 0.5}, "lower") is None
    assert winner({"selfcrag": None, "plain": 0.5}, "higher") is None
    assert winner({"selfcrag": 0.9, "plain": 0.8}, "") is None


def test_contains_gold_matches_whole_words_after_normalisation():
    assert contains_gold("It was The Beatles, in 1962.", ["beatles"])
    assert contains_gold("Return within 30 days.", ["30 days"])
    assert not contains_gold("Her eyes were blue.", ["yes"])
    assert not contains_gold("A policy change.", ["pol"])
    assert not contains_gold("anything", [""])


def test_question_file_errors_are_one_line(tmp_path: Path):
    good = {"id": "a", "question": "Q?", "answers": ["x"], "is_impossible": False, "context_title": "T"}
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "id": "b", "answers": [], "is_impossible": True})
                    + "\n", encoding="utf-8")
    loaded = load_questions(path)
    assert [q["id"] for q in loaded] == ["a", "b"] and loaded[0]["group"] == "T"
    assert len(load_questions(path, limit=1)) == 1
    cases = [
        ("{not json}\n", "q.jsonl:1: invalid JSON"),
        (json.dumps({"id": "a"}) + "\n", "q.jsonl:1: missing 'question'"),
        (json.dumps({**good, "answers": []}) + "\n", "needs at least one of 'answers'"),
        (json.dumps(good) + "\n" + json.dumps(good) + "\n", "q.jsonl:2: duplicate id 'a'"),
        ("\n", "holds no questions"),
    ]
    for text, message in cases:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(QuestionFileError, match=message) as caught:
            load_questions(path)
        assert "\n" not in str(caught.value)
    with pytest.raises(QuestionFileError, match="cannot read questions"):
        load_questions(tmp_path / "missing.jsonl")


def test_risk_at_coverage_spreads_a_straddling_tie():
    # Half of 4 = the 0.9 (right) and half of the 0.8 tie (one right, one wrong): 0.5 errors over 2.
    assert m.risk_at_coverage(CONFIDENCE, CORRECT, 0.5) == pytest.approx(0.25)
    assert m.risk_at_coverage(CONFIDENCE, CORRECT, 0.25) == 0.0
    assert m.risk_at_coverage(CONFIDENCE, CORRECT, 0.8) == pytest.approx(0.5)  # ceil(3.2) = 4 questions
    assert m.risk_at_coverage([], [], 0.5) is None


def test_effective_reliability_scores_the_decisions():
    rows = [
        record("selfcrag", False, True, True, 0.9),
        record("selfcrag", False, True, True, 0.8),
        record("selfcrag", True, True, False, 0.6),  # an unanswerable question answered is wrong
        record("selfcrag", True, False, False, 0.1),  # an abstention costs nothing
    ]
    summary = m.summarise(rows)
    assert (summary["right"], summary["wrong"], summary["coverage"]) == (2, 1, 0.75)
    assert summary["effective_reliability"] == {"0": 0.5, "1": 0.25, "3": -0.25}
    assert m.summarise([record("selfcrag", False, False, False, 0.1)])["effective_reliability"] == {
        "0": 0.0, "1": 0.0, "3": 0.0}
    assert summary["hit_at_k"] is None  # no question named its gold document


def test_hit_at_k_counts_questions_that_name_their_gold_document():
    from selfcrag.evaluation.run import gold_hit

    assert gold_hit(["Yuan_dynasty#p5#0", "Yuan_dynasty#p16#2"], ["Yuan_dynasty#p16"]) is True
    assert gold_hit(["Yuan_dynasty#p1#0"], ["Yuan_dynasty#p16"]) is False  # p1 is not p16
    assert gold_hit(["Ed Wood#0"], ["Scott Derrickson", "Ed Wood"]) is True
    assert gold_hit(["Ed Wood#0"], []) is None
    rows = [{**record("plain", False, True, True, 0.9), "gold_hit": hit} for hit in (True, False, True)]
    assert m.summarise([*rows, record("plain", False, False, False, 0.2)])["hit_at_k"] == pytest.approx(2 / 3)


def test_question_files_name_their_gold_documents(tmp_path: Path):
    path = tmp_path / "q.jsonl"
    rows = [{"id": "s", "question": "Q?", "answers": ["x"], "context_id": "Yuan_dynasty#p16"},
            {"id": "h", "question": "Q?", "answers": ["x"], "gold_titles": ["Scott Derrickson", "Ed Wood"]},
            {"id": "p", "question": "Q?", "answers": ["x"]}]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert [q["gold"] for q in load_questions(path)] == [["Yuan_dynasty#p16"], ["Scott Derrickson", "Ed Wood"], []]
    path.write_text(json.dumps({**rows[0], "context_id": 7}) + "\n", encoding="utf-8")
    with pytest.raises(QuestionFileError, match="q.jsonl:1: 'context_id' / 'gold_titles' must be"):
        load_questions(path)


def test_faults_by_node_gives_each_roles_parse_failure_rate():
    from selfcrag.evaluation.signals import node_faults

    trace = [{"node": "generate"}, {"node": "check_hallucination", "error": "malformed reply: 'Yes'"},
             {"node": "check_hallucination", "error": "LengthFinishReasonError: Could not parse response content"},
             {"node": "rewrite_query", "error": "the model returned the last query unchanged"},
             {"node": "check_hallucination"}]  # fmt: skip
    assert node_faults(trace) == {"generate": [1, 0, 0], "check_hallucination": [3, 2, 2], "rewrite_query": [1, 1, 0]}
    rows = [{**record("selfcrag", False, True, True, 0.9), "signals": {"node_faults": node_faults(trace)}},
            {**record("selfcrag", False, False, False, 0.2), "signals": {"node_faults": {"generate": [1, 0, 0]}}}]
    faults = m.summarise(rows)["faults_by_node"]
    assert set(faults) == {"check_hallucination", "rewrite_query"}  # generate never faulted
    third = pytest.approx(2 / 3)
    assert faults["check_hallucination"] == {"steps": 3, "faults": 2, "parse_failures": 2, "fault_rate": third,
                                             "parse_failure_rate": third}
    assert faults["rewrite_query"]["parse_failure_rate"] == 0.0  # a fault, but the reply was read


def test_a_model_servers_cpu_is_measured_per_question_when_its_pid_is_given():
    import os

    from selfcrag.errors import EvalError
    from selfcrag.evaluation.run import measure, process_cpu

    probe = process_cpu(os.getpid())  # this process stands in for the server: its CPU is what the probe reads
    question = {"id": "q", "question": "Q?", "answers": ["x"], "is_impossible": False, "group": "", "gold": []}

    def busy(_question: str) -> dict:
        deadline = probe() + 0.05
        while probe() < deadline:  # burn 50 ms of CPU where the probe sees it
            pass
        return {"answer": "x", "judged": "x", "decision": "answer", "confidence": 0.9, "answered": True,
                "llm_calls": 1, "tokens": 1, "signals": {}, "detail": {}, "retrieved": []}

    measured = measure("plain", busy, question, probe)
    assert measured["server_cpu_ms"] >= 50
    assert "server_cpu_ms" not in measure("plain", busy, question)  # not asked: not recorded
    summary = m.summarise([{**record("plain", False, True, True, 0.9), "server_cpu_ms": 80.0},
                           {**record("plain", False, True, True, 0.8), "server_cpu_ms": 120.0}])
    assert summary["server_cpu_ms"] == {"p50": 100.0, "p95": pytest.approx(118.0), "mean": 100.0}
    assert m.summarise([record("plain", False, True, True, 0.9)])["server_cpu_ms"]["p50"] is None
    with pytest.raises(EvalError, match="--server-pid 0: no process"):
        process_cpu(0)
