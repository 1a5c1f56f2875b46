"""Drafts, selective plain and paired bootstrap intervals (evaluation/paired.py), and the yes/no judge, on records
small enough to check by hand."""

from __future__ import annotations

import pytest

from selfcrag.evaluation import metrics as m
from selfcrag.evaluation import paired
from selfcrag.evaluation.questions import contains_gold


def rec(qid: str, system: str, *, answer: str = "", draft: str | None = None, answered: bool = False,
        confidence: float = 0.5, gold: str = "Paris", impossible: bool = False, **extra: object) -> dict:  # fmt: skip
    correct = answered and not impossible and contains_gold(answer, [gold])
    row = {"id": qid, "system": system, "answer": answer, "answered": answered, "correct": correct,
           "confidence": confidence, "answers": [] if impossible else [gold], "is_impossible": impossible,
           "decision": "answer" if answered else "abstain", "latency_ms": 1.0, "cpu_ms": 1.0, "llm_calls": 1,
           "tokens": 1, **extra}  # fmt: skip
    if draft is not None:
        row["draft"] = draft
    return row


def test_a_yes_no_question_is_judged_by_its_polarity_word():
    assert contains_gold("Yes, both are American.", ["yes"])
    assert contains_gold("[doc_1] No. They were born in different countries.", ["no"])
    assert not contains_gold("Both are American.", ["yes"])  # a sentence that says neither
    assert not contains_gold("The tower has no sequel.", ["no"])  # a "no" that is not the answer
    assert not contains_gold("No, yes is not right.", ["yes"])
    assert contains_gold("It was Paris, yes.", ["Paris"])  # other golds as before: whole words anywhere


def test_auroc_among_shown_answers_and_among_drafts():
    rows = [
        rec("1", "selfcrag", answer="Paris", draft="Paris", answered=True, confidence=0.9),
        rec("2", "selfcrag", answer="Lyon", draft="Lyon", answered=True, confidence=0.8),
        rec("3", "selfcrag", answer="I don't know", draft="Paris", confidence=0.7),  # a right draft withheld
        rec("4", "selfcrag", answer="I don't know", draft="", confidence=0.0),  # no draft: not ranked
    ]
    summary = m.summarise(rows)
    assert summary["auroc_shown"] == 1.0  # among what was shown the right answer ranks first
    # Drafts: 0.9 right, 0.8 wrong, 0.7 right -> one of two right drafts above the wrong one.
    assert summary["auroc_drafts"] == 0.5 and summary["drafted"] == 3
    assert summary["auroc"] == 1.0  # over all questions the withheld right draft counts as a wrong answer
    assert summary["right_drafts"] == 2


def test_candidates_come_from_the_detail_when_listed():
    listed = [{"answer": "Lyon", "confidence": 0.6, "shown": True}, {"answer": "Paris", "confidence": 0.4,
                                                                      "shown": False}]  # fmt: skip
    row = rec("1", "selfcrag", answer="Lyon", draft="Lyon", answered=True, confidence=0.6,
              detail={"candidates": listed})
    assert paired.best_draft(row) == {"answer": "Lyon", "confidence": 0.6, "shown": True}
    assert paired.any_right(row)  # a right candidate the choice passed over
    assert m.summarise([row])["right_drafts"] == 1


def test_selective_plain_and_its_floor():
    plain = [rec(str(i), "plain", answer=a, answered=True, confidence=c)
             for i, (a, c) in enumerate([("Paris", 0.9), ("Lyon", 0.3), ("Paris", 0.6), ("Nice", 0.5)])]
    confidence = [r["confidence"] for r in plain]
    correct, answered = [r["correct"] for r in plain], [r["answered"] for r in plain]
    assert paired.best_floor(confidence, correct, answered, 1.0) == 0.6  # shows 2 right, 0 wrong
    assert paired.best_floor(confidence, correct, answered, 0.0) == 0.0  # at no cost, answer everything
    shown = paired.selective(plain, 0.6)
    assert [r["answered"] for r in shown] == [True, False, True, False]
    result = m.metrics(plain, selective_floor=0.6)
    assert result["systems"]["selective_plain"]["effective_reliability"]["1"] == 0.5
    assert result["systems"]["plain"]["effective_reliability"]["1"] == 0.0
    assert result["differences_to_plain"]["selective_plain"]["phi_1"]["difference"] == 0.5


def test_the_paired_bootstrap_is_seeded_and_brackets_the_difference():
    ours = [rec(str(i), "selfcrag", answer="Paris" if i % 3 else "", answered=bool(i % 3)) for i in range(30)]
    theirs = [rec(str(i), "plain", answer="Paris" if i % 2 else "Lyon", answered=True) for i in range(30)]
    first, again = paired.differences(ours, theirs), paired.differences(ours, theirs)
    assert first == again  # seeded: the same records give the same interval
    # ours: 20 right, 0 wrong; plain: 15 right, 15 wrong. Phi_1 difference (20 - (15 - 15)) / 30.
    assert first["phi_1"]["difference"] == pytest.approx(20 / 30, abs=1e-4)
    assert first["right"]["difference"] == 5 and first["coverage"]["difference"] == pytest.approx(-1 / 3, abs=1e-4)
    for row in first.values():
        assert row["low"] <= row["difference"] <= row["high"]
    assert first["phi_3"]["low"] > 0  # 15 wrong answers fewer at cost 3 is no accident at n = 30
    # Unpaired questions are left out.
    assert paired.differences(ours[:5], theirs[10:]) == {}


def test_refit_reads_every_candidates_features_and_redecides():
    from selfcrag.evaluation.calibrate import rows_of
    from selfcrag.evaluation.refit import redecide

    listed = [{"answer": "Lyon", "confidence": 0.6, "shown": True, "features": {"retrieval_top": 0.6}},
              {"answer": "Paris", "confidence": 0.4, "shown": False, "features": {"retrieval_top": 0.9}}]
    records = [rec("1", "selfcrag", answer="Lyon", draft="Lyon", answered=True, detail={"candidates": listed}),
               rec("2", "selfcrag", draft="Paris",
                   detail={"confidence_explanation": {"features": {"retrieval_top": 1}}}),
               rec("1", "plain", answer="Lyon", answered=True), rec("2", "plain", answer="Paris", answered=True)]
    rows = rows_of(records)
    assert [(r["id"], r["label"], r["features"]["retrieval_top"]) for r in rows] == [
        ("1", False, 0.6), ("1", True, 0.9), ("2", True, 1)]
    # A fit that prefers the passed-over right candidate shows it; question 2's draft stays below the floor.
    decided = redecide(rows, [0.3, 0.8, 0.2], records, cost=1.0)
    assert decided["selfcrag"] == {"right": 1, "wrong": 0, "questions": 2, "coverage": 0.5, "phi_1": 0.5,
                                   "phi_3": 0.5}
    assert decided["plain"]["right"] == 1 and decided["plain"]["wrong"] == 1


def test_a_fit_for_scored_drafts_keeps_unvetoed_ungrounded_candidates_and_reads_unmeasured_as_the_mean():
    from selfcrag.evaluation.calibrate import matrix, rows_of

    listed = [{"answer": "Paris", "confidence": 0.7, "showable": True, "features": {"grade_top": 0.0},
               "unmeasured": ["grade_top"]},  # plain's draft, scored before any grading
              {"answer": "Paris", "confidence": 0.0, "showable": False, "features": {"grade_top": 0.8}},  # ungrounded
              {"answer": "Lyon", "confidence": 0.0, "showable": False, "vetoed": True,
               "features": {"grade_top": 0.4}}]  # fmt: skip
    records = [rec("1", "selfcrag", answer="Paris", draft="Paris", answered=True, detail={"candidates": listed})]
    assert [r["features"]["grade_top"] for r in rows_of(records)] == [0.0]  # a withheld file's fit: grounded only
    scored = rows_of(records, ungrounded=True)
    assert [r["features"]["grade_top"] for r in scored] == [0.0, 0.8]  # the vetoed one is never a candidate
    assert matrix(scored, ["grade_top"]).tolist() == [[0.8], [0.8]]  # unmeasured: the measured rows' mean


def test_a_question_without_an_article_is_a_fold_group_of_its_own():
    from selfcrag.evaluation.calibrate import folds, rows_of

    # SQuAD questions carry their article; HaluEval's carry none. Mixed, the untitled ones must not all share one
    # fold (one "" group), and a question's candidates must never be split across folds.
    listed = [{"answer": "Paris", "confidence": 0.6, "features": {}}, {"answer": "Lyon", "confidence": 0.4,
                                                                         "features": {}}]
    records = [rec(str(i), "selfcrag", draft="Paris", group=f"article {i % 3}") for i in range(6)]
    records += [rec(f"h{i}", "selfcrag", draft="Paris", group="", detail={"candidates": listed}) for i in range(8)]
    rows = rows_of(records)
    untitled = [r for r in rows if r["id"].startswith("h")]
    assert len({r["group"] for r in untitled}) == 8
    fold_of = {i: k for k, fold in enumerate(folds([r["group"] for r in rows])) for i in fold.tolist()}
    assert len({fold_of[i] for i, r in enumerate(rows) if r["id"].startswith("h")}) > 1
    for qid in {r["id"] for r in rows}:
        assert len({fold_of[i] for i, r in enumerate(rows) if r["id"] == qid}) == 1
