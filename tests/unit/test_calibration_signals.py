"""The general calibration signals (retriever agreement, names, the answer grading's findings) and the chooser of
the abstain floor."""

from __future__ import annotations

import pytest

from selfcrag.evaluation import calibrate as fitting
from selfcrag.quality.calibration import features

RUN = {
    "question": "When did Kublai Khan move the capital to Beijing?",
    "knowledge": [{"id": "yuan#0", "doc_id": "yuan", "title": "Yuan_dynasty", "score": 0.9,
                   "text": "In 1272 Kublai Khan moved the capital to Khanbaliq, present-day Beijing."},
                  {"id": "song#3", "doc_id": "song", "title": "Song dynasty", "score": 0.4,
                   "text": "The Song capital was Hangzhou."}],
    "citations": [{"ref": "doc_1", "doc_id": "yuan", "title": "Yuan_dynasty", "source": "y.md", "quote": "1272"}],
    "trace": [{"node": "retrieve", "passages": [{"id": "yuan#0", "score": 0.9, "vector_rank": 0, "keyword_rank": 2},
                                                {"id": "song#3", "score": 0.5, "vector_rank": 1},
                                                {"id": "song#4", "score": 0.4, "keyword_rank": 0}]},
              {"node": "grade_documents", "grades": [{"id": "yuan#0", "label": "correct", "score": 0.9},
                                                     {"id": "song#3", "label": "incorrect", "score": 0.3}]},
              {"node": "generate", "decision": "no answer"}, {"node": "generate", "decision": "draft"},
              {"node": "grade_answer", "decision": "useful", "violations": 1, "term_coverage": 0.75},
              {"node": "grade_answer", "decision": "useful", "violations": 0, "term_coverage": 0.8},
              {"node": "check_hallucination", "decision": "grounded", "findings": 0}],
}  # fmt: skip
ANSWER = "In 1272 Kublai Khan moved the capital to Khanbaliq, present-day Beijing. [doc_1]"


def test_the_general_signals_read_the_trace():
    values = features(RUN, ANSWER)  # type: ignore[arg-type]
    assert values["retrievers_agree"] == pytest.approx(1 / 3, abs=1e-4)  # the cited chunk: vector 1st, keyword 3rd
    assert values["names_found"] == 1.0  # Kublai, Khan, Beijing are all in the cited evidence
    assert values["grade_margin"] == pytest.approx(0.6)
    assert values["distinct_documents"] == 2.0  # yuan, song
    assert values["answer_term_coverage"] == 0.8 and values["constraint_violations"] == 0.0  # the last grading
    assert values["declined"] == 1.0 and values["regenerations"] == 1.0


def test_signals_fall_back_when_the_run_lacks_them():
    other = {**RUN, "question": "When did Marco Polo reach Hangzhou?", "trace": RUN["trace"][:1]}
    values = features(other, ANSWER)  # type: ignore[arg-type]
    assert values["names_found"] == pytest.approx(0.0)  # Marco, Polo, Hangzhou: none in the cited document
    assert values["answer_term_coverage"] == 0.0 and values["declined"] == 0.0 and values["regenerations"] == 0.0
    unranked = {**RUN, "trace": [{"node": "retrieve", "passages": [{"id": "yuan#0", "score": 0.9}]}]}
    assert features(unranked, ANSWER)["retrievers_agree"] == 0.0  # type: ignore[arg-type]  # a retriever without ranks


def rows(spec: list[tuple[float, bool | None]]) -> tuple[list[float], list[dict]]:
    """(confidence, right) per drafted run; right None: an unanswerable question (its draft is wrong)."""
    made = [{"label": bool(right), "drafted": True, "impossible": right is None, "source": "s", "group": "",
             "features": {}, "before": 0.0} for _, right in spec]
    return [p for p, _ in spec], made


def test_the_cost_table_says_what_each_cost_s_floor_does_beside_plain():
    # drafts to unanswerable questions at 0.2 (4), 0.3 (2) and 0.5 (1); right ones at 0.3 and 0.9 (3); a wrong
    # answer to an answerable question at 0.6. Plain RAG: 4 right, 8 wrong (6 of them unanswerable), 12 questions.
    spec = [(0.2, None)] * 4 + [(0.3, None)] * 2 + [(0.5, None), (0.3, True), (0.6, False)] + [(0.9, True)] * 3
    confidence, made = rows(spec)
    plain = {"s": {"questions": 12, "right": 4, "wrong": 8, "unanswerable": 6}}
    [lenient, even, cautious] = fitting.cost_table(confidence, made, plain, [0.25, 1, 3])
    assert lenient["floor"] == 0.2 and (lenient["right"], lenient["wrong"]) == (4, 8)
    # cost 1: p >= 0.5 shows the three 0.9s, the wrong 0.6 and the unanswerable 0.5
    assert even["floor"] == 0.5 and (even["right"], even["wrong"]) == (3, 2) and even["coverage"] == round(5 / 12, 4)
    assert even["phi_1"] == round(1 / 12, 4) and even["plain_phi_1"] == round(-4 / 12, 4)
    assert even["phi_3"] == round(-3 / 12, 4) and even["plain_phi_3"] == round(-20 / 12, 4)
    assert even["right_vs_plain"] == 0.75 and even["unanswerable_vs_plain"] == round(1 / 6, 4)
    assert cautious["floor"] == 0.75 and (cautious["right"], cautious["wrong"]) == (3, 0)
    assert fitting.unanswerable_ratio(confidence, made, 8, 0.0) == 7 / 8


def test_right_answers_kept_is_counted_in_the_source_that_loses_most():
    confidence = [0.4, 0.4, 0.9, 0.3]
    made = [{"label": True, "drafted": True, "impossible": False, "source": source} for source in "aabb"]
    assert fitting.kept_right(confidence, made, 0.35) == 0.5  # source b keeps one of its two


def test_a_failed_grader_s_placeholder_pushes_the_confidence_neither_way():
    from selfcrag.quality.calibration import Calibrator, unmeasured

    failed = {**RUN, "trace": [*RUN["trace"], {"node": "grade_answer", "error": "TimeoutError", "violations": 0}]}
    # `verifier` too: no local verifier measured a draft in these runs (it is off by default); nor did a server give
    # the generator's token probabilities (`answer_probability`: an offline run)
    offline = {"verifier", "answer_probability"}
    assert unmeasured(failed) == {"answer_relevance", *offline}  # type: ignore[arg-type]
    assert unmeasured(RUN) == offline  # type: ignore[arg-type]
    # A grader that has not run yet measured nothing either: plain's draft is scored before any grading.
    ungraded = {**RUN, "trace": [s for s in RUN["trace"] if s["node"] != "grade_documents"]}
    assert unmeasured(ungraded) == {"grade_top", "grade_correct_share", "grade_margin", *offline}  # type: ignore[arg-type]
    verified = {**RUN, "trace": [*RUN["trace"], {"node": "verify", "score": 0.9, "verified": "Paris [doc_1]"}]}
    assert unmeasured(verified, "Paris") == offline  # type: ignore[arg-type]  # another draft than this
    verified["trace"][-1]["verified"] = "Paris"
    assert unmeasured(verified, "Paris [doc_1]") == {"answer_probability"}  # type: ignore[arg-type]
    drafted = [s for s in verified["trace"] if s["node"] in ("first_draft", "generate")]
    drafted[-1]["answer_probability"] = 0.81  # the model backend's generator, on a server that gave logprobs
    assert unmeasured(verified, "Paris [doc_1]") == frozenset()  # type: ignore[arg-type]
    model = Calibrator(("answer_relevance", "retrieval_margin"), (0.8, 0.3), (0.2, 0.2), (1.0, 0.5), bias=0.0)
    values = {"answer_relevance": 0.7, "retrieval_margin": 0.5}  # 0.7: the fail-open placeholder, below the mean
    assert model.contributions(values)["answer_relevance"] == -0.5
    assert model.contributions(values, unmeasured(failed))["answer_relevance"] == 0.0  # type: ignore[arg-type]
    assert model.probability(values, frozenset({"answer_relevance"})) > model.probability(values)


def test_the_general_cost_is_the_most_cautious_that_keeps_enough_right_answers_everywhere():
    table = [{"cost": 0.5, "right_vs_plain": 0.95}, {"cost": 0.5, "right_vs_plain": 0.9},
             {"cost": 1, "right_vs_plain": 0.85}, {"cost": 1, "right_vs_plain": 0.7},  # one source loses too many
             {"cost": 3, "right_vs_plain": 0.1}, {"cost": 3, "right_vs_plain": 0.2}]  # fmt: skip
    assert fitting.most_cautious_cost(table, 0.8) == 0.5
    assert fitting.most_cautious_cost(table, 0.7) == 1
    assert fitting.most_cautious_cost(table, 0.99) is None
