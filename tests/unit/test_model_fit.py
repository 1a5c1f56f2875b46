"""benchmarks/model_fit.py's verdict on corrections: decided from every candidate against plain's draft alone."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_model_fit():
    spec = importlib.util.spec_from_file_location("model_fit", ROOT / "benchmarks" / "model_fit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(question: int, plain: bool, right: bool, drafted: bool = True) -> dict:
    return {"id": str(question), "source": "squad", "group": "g", "features": {"plain_draft": float(plain)},
            "label": right, "drafted": drafted, "before": 0.0}


def test_corrections_pay_only_when_they_raise_phi_at_the_cost(monkeypatch):
    module = load_model_fit()
    monkeypatch.setattr(module, "MIN_CORRECTED", 1)
    corrections = module.corrections
    floor = 0.5
    # Plain's drafts are below the floor on every question; a correction's draft above it is right on three of four.
    rows = [r for q in range(4) for r in (row(q, True, False), row(q, False, q != 3))]
    probabilities = [p for _ in range(4) for p in (0.2, 0.8)]
    paid = corrections(rows, probabilities, floor, 1.0)
    assert paid["pay"] is True and paid["plain_draft_only"] == {"right": 0, "wrong": 0}
    assert paid["all_candidates"] == {"right": 3, "wrong": 1} and paid["phi_difference"]["difference"] == 0.5
    # The same corrections writing wrong answers on three of four: they lower Phi_1, so they do not pay.
    rows = [r for q in range(4) for r in (row(q, True, False), row(q, False, q == 3))]
    assert corrections(rows, probabilities, floor, 1.0)["pay"] is False
    # A question whose plain draft could not be shown is one with nothing to show without corrections.
    rows = [row(0, True, True), row(1, False, True)]
    paid = corrections(rows, [0.9, 0.9], floor, 1.0)
    assert paid["plain_draft_only"] == {"right": 1, "wrong": 0} and paid["all_candidates"] == {"right": 2, "wrong": 0}


def test_records_with_too_few_corrections_say_nothing_about_them():
    module = load_model_fit()
    rows = [row(0, True, True), row(1, True, False), row(2, True, False, drafted=False)]
    assert module.corrections(rows, [0.9, 0.9, 0.0], 0.5, 1.0) is None
    few = [*rows, *(row(q, False, False) for q in range(module.MIN_CORRECTED - 1))]
    assert module.corrections(few, [0.9] * len(few), 0.5, 1.0) is None


def test_a_kept_calibration_is_the_runs_own_with_only_its_corrections_verdict(tmp_path):
    from selfcrag.quality.calibration import load

    module = load_model_fit()
    used = ROOT / "src" / "selfcrag" / "data" / "calibration" / "offline.json"
    verdict = {"pay": False, "cost": 0.75, "questions": 60, "questions_corrected": 25}
    out = tmp_path / "model_x.json"
    module.keep(out, used, verdict, {"command": "benchmarks/model_fit.py ..."})
    kept, original = json.loads(out.read_text()), json.loads(used.read_text())
    assert kept.pop("corrections") == {**verdict, "decided_by": "offline.json's own confidences",
                                       "provenance": {"command": "benchmarks/model_fit.py ..."}}
    assert kept == original  # the score itself is the general one, unchanged
    calibrator = load(out)
    assert calibrator.corrections_pay is False and calibrator.features == load(used).features
