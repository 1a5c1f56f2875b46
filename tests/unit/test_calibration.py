"""The calibrator and its fit: features of a run, the logistic fit, grouped folds, the file and its faults."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from selfcrag.context import Context
from selfcrag.errors import CalibrationError, SettingsError
from selfcrag.evaluation import calibrate as fitting
from selfcrag.quality.calibration import FEATURES, features, load, model_file, shipped, sigmoid

RUN = {
    "question": "How many days do I have to return an item?",
    "knowledge": [{"id": "a#0", "doc_id": "a", "title": "Returns", "text": "Items can be returned within 30 days.",
                   "score": 0.8},
                  {"id": "b#0", "doc_id": "b", "title": "Shipping", "text": "Shipping takes 5 days.", "score": 0.5}],
    "citations": [{"ref": "doc_1", "doc_id": "a", "title": "Returns", "source": "a.md", "quote": "30 days"}],
    "groundedness": 1.0, "answer_relevance": 0.9, "unsupported_claims": [],
    "trace": [{"node": "retrieve", "passages": [{"id": "a#0", "score": 0.9}, {"id": "b#0", "score": 0.6}]},
              {"node": "grade_documents", "grades": [{"id": "a#0", "label": "correct", "score": 0.95},
                                                     {"id": "b#0", "label": "incorrect", "score": 0.2}]},
              {"node": "retrieve", "passages": [{"id": "c#0", "score": 0.7}]}],
}  # fmt: skip


def test_features_read_the_run_from_state_and_trace():
    values = features(RUN, "Items can be returned within 30 days. [doc_1]")  # type: ignore[arg-type]
    assert set(values) == set(FEATURES)
    assert values["retrieval_top"] == 0.9 and values["retrieval_margin"] == pytest.approx(0.3)
    assert values["grade_top"] == 0.95 and values["grade_correct_share"] == 0.5
    assert values["context_relevance"] == 0.8 and values["sources"] == 2.0
    assert values["answer_type"] == 1.0  # "how many" answered with a number
    assert values["extra_rounds"] == 1.0 and values["evidence_changed"] == 1.0
    assert values["opposite"] == 0.0 and values["contradiction"] == 0.0
    assert features(RUN, "", contradicted=True)["contradiction"] == 1.0  # type: ignore[arg-type]


def test_the_fit_recovers_a_known_logistic_model():
    draw = np.random.default_rng(0)
    x = draw.normal(size=(4000, 2))
    p = 1 / (1 + np.exp(-(1.5 * x[:, 0] - 0.8 * x[:, 1] + 0.3)))
    weights, bias = fitting.fit_logistic(x, (draw.random(4000) < p).astype(float), l2=0.0)
    assert weights == pytest.approx([1.5, -0.8], abs=0.15) and bias == pytest.approx(0.3, abs=0.15)


def test_folds_never_split_a_group():
    groups = [f"article-{i % 5}" for i in range(50)]
    seen = {}
    for k, test in enumerate(fitting.folds(groups)):
        for i in test:
            assert seen.setdefault(groups[i], k) == k
    assert sorted(i for test in fitting.folds(groups) for i in test) == list(range(50))
    # without articles each question is its own group
    assert len(fitting.folds([""] * 30)) == 8


def rows(n: int = 240, seed: int = 1) -> list[dict]:
    """Runs where answer relevance predicts the label, `opposite` fires on wrong ones, the rest is noise."""
    draw = np.random.default_rng(seed)
    made = []
    for i in range(n):
        relevance = float(draw.random())
        right = bool(draw.random() < relevance)
        values = {name: float(draw.random()) for name in FEATURES}
        values |= {"answer_relevance": relevance, "opposite": float(not right and draw.random() < 0.5)}
        made.append({"features": values, "label": right, "drafted": True, "group": f"g{i % 6}", "before": 0.5})
    return made


def test_selection_keeps_the_signals_and_the_file_round_trips(tmp_path):
    fitted = fitting.fit(rows(), list(FEATURES))
    model = fitted["model"]
    assert set(model["features"][:2]) == {"answer_relevance", "opposite"} and len(model["features"]) <= 4
    cv = fitted["cross_validation"]
    assert cv["after"]["auroc"] > 0.75 and cv["grouped_by"] == "context_title" and cv["folds"] == 6
    out = tmp_path / "mine.json"
    fitting.write(out, fitted, {"questions": 240})
    loaded = load(out)
    assert loaded.features == tuple(model["features"])
    values = rows(1, seed=9)[0]["features"]
    z = [(values[n] - m) / s for n, m, s in zip(model["features"], model["mean"], model["scale"], strict=True)]
    expected = sigmoid(model["bias"] + sum(w * v for w, v in zip(model["weights"], z, strict=True)))
    assert loaded.probability(values) == pytest.approx(expected, abs=1e-4)  # contributions keep 4 decimals
    assert loaded.ungrounded_drafts == "withheld" and not loaded.scores_ungrounded  # what a file says by default
    fitting.write(out, fitted, {"questions": 240}, ungrounded_drafts="scored")  # fitted on runs that kept them
    assert load(out).scores_ungrounded and json.loads(out.read_text())["ungrounded_drafts"] == "scored"


def test_a_feature_whose_weight_goes_against_its_direction_is_not_taken():
    made = rows()
    for row in made:  # "opposite" (a conflict with the question) made to mark RIGHT answers: refused
        row["features"]["opposite"] = float(row["label"])
    assert "opposite" not in fitting.fit(made, list(FEATURES))["model"]["features"]


def test_one_kind_of_label_is_nothing_to_fit():
    made = [row | {"label": False} for row in rows(40)]
    with pytest.raises(fitting.CalibrationDataError, match="some answered right and some wrong"):
        fitting.fit(made, list(FEATURES))


def test_the_shipped_file_is_a_fit_with_provenance():
    data = json.loads(shipped("offline").read_text(encoding="utf-8"))
    assert shipped("model") == shipped("offline")  # the model backend uses the offline fit until one is made
    # ... and a generator model's own fit is data/calibration/model_<its name, provider dropped>.json, when shipped
    assert model_file("openai:Qwen2.5-Coder-0.5B") == "qwen2.5-coder-0.5b" and model_file("ollama:llama3.1:8b") == (
        "llama3.1-8b")  # fmt: skip
    assert shipped("model", model="openai:no-such-model") == shipped("offline")
    # The 0.5B's own file is the general fit with its tuning runs' verdict: correcting did not pay for it.
    small = json.loads(shipped("model", model="openai:qwen2.5-coder-0.5b").read_text(encoding="utf-8"))
    assert small["model"] == data["model"] and small["corrections"]["pay"] is False
    assert small["corrections"]["phi_difference"]["high"] < 0  # the whole interval below plain's draft alone
    assert data["provenance"]["questions"] >= 400 and len(data["provenance"]["data"][0]["sha256"]) == 64
    assert data["cross_validation"]["after"]["ece"] < 0.1
    calibrator = load(shipped())
    assert all(FEATURES[n][0] * w >= 0 for n, w in zip(calibrator.features, calibrator.weights, strict=True))


@pytest.mark.parametrize(
    ("content", "fault"),
    [(None, "No such file"), ("{not json", "not a selfcrag calibration"),
     (json.dumps({"model": {"features": ["shoe_size"], "mean": [0], "scale": [1], "weights": [1], "bias": 0}}),
      "unknown features: shoe_size"),
     (json.dumps({"model": {"features": ["grade_top"], "mean": [0, 1], "scale": [1], "weights": [1], "bias": 0}}),
      "one value per feature"),
     (json.dumps({"model": {"features": ["grade_top"], "mean": [0], "scale": [1], "weights": [math.inf],
                            "bias": 0}}), "finite"),
     (json.dumps({"model": {"features": ["grade_top"], "mean": [0], "scale": [1], "weights": [1], "bias": 0},
                  "ungrounded_drafts": "always"}), "ungrounded_drafts must be one of withheld, scored"),
     (json.dumps({"model": {"features": ["grade_top"], "mean": [0], "scale": [1], "weights": [1], "bias": 0},
                  "corrections": {"pay": "no"}}), "corrections.pay must be true or false"),
     (json.dumps({"model": {"features": ["grade_top"], "mean": [0], "scale": [1], "weights": [1], "bias": 0},
                  "corrections": {"measured": 1}}), "not a selfcrag calibration")],
)  # fmt: skip
def test_a_bad_file_is_one_line_naming_it(tmp_path, content, fault):
    path = tmp_path / "calibration.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(CalibrationError, match=fault) as caught:
        load(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(SettingsError, match="calibration") as refused:  # refused when the settings are made
        Context.from_env(calibration=str(path))
    assert "\n" not in str(refused.value)


def test_a_verdict_that_corrections_do_not_pay_binds_only_the_backend_whose_runs_decided_it(tmp_path):
    from selfcrag.quality.calibration import for_settings

    model = {"features": ["grade_top"], "mean": [0], "scale": [1], "weights": [1], "bias": 0}
    decided = tmp_path / "offline_verdict.json"
    decided.write_text(json.dumps({"model": model, "corrections": {"pay": False, "backend": "offline"}}))
    anywhere = tmp_path / "any_backend.json"
    anywhere.write_text(json.dumps({"model": model, "corrections": {"pay": False}}))
    offline = Context.from_env(backend="offline", calibration=str(decided))
    borrowed = offline.model_copy(update={"backend": "model"})  # a model run using the offline fit, unmeasured
    assert for_settings(offline).corrections_pay is False
    assert for_settings(borrowed).corrections_pay is True
    assert for_settings(borrowed.model_copy(update={"calibration": str(anywhere)})).corrections_pay is False


def test_a_feature_that_makes_the_floor_withhold_more_right_answers_is_not_taken():
    made = rows()
    assert len(fitting.fit(made, list(FEATURES))["model"]["features"]) >= 2

    def keeps(confidence, drafted):  # stands in for floor_keeps: here sharper probabilities withhold more
        return -float(np.std(confidence))

    # The first feature is taken on log-loss alone; every later one must keep at least as many right answers.
    assert len(fitting.fit(made, list(FEATURES), keeps=keeps)["model"]["features"]) == 1


def test_keeps_at_reads_the_share_of_right_drafts_shown_at_the_floor():
    made = [{"drafted": True, "label": right, "impossible": impossible, "source": "s"}
            for right, impossible in [(True, False)] * 4 + [(False, True)] * 4]
    confidence = [0.9, 0.8, 0.4, 0.2, 0.7, 0.3, 0.1, 0.05]
    assert fitting.keeps_at(0.5)(confidence, made) == 0.5  # 0.9 and 0.8 of the four right drafts
    assert fitting.keeps_at(0.0)(confidence, made) == 1.0

