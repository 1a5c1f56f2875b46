"""The model backend against a real local LLM (Qwen2.5-Coder-0.5B-Instruct, served by xllamacpp through
tests/support/local_llm.py): the run's settings name the model and the server's URL, so the graph builds the real
`ChatOpenAI` itself, as for OpenAI. A handful of questions of the sample knowledge base: the model is small and the
CPU is shared, so each question costs tens of seconds.

What a real small model does that the scripted ones never did: return JSON that is almost right, say yes to every
passage, answer without citation labels, hand the last query back as the rewrite. These tests hold the graph to
its promises through all of that: answerable questions get cited answers, unanswerable ones abstain, and replies
that cannot be parsed stay rare (<= 2% of the calls)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.local_llm import MODEL, local_llm

from selfcrag import build_graph
from selfcrag.quality.calibration import load, sigmoid

pytestmark = pytest.mark.system  # the real 0.5B model, served by xllamacpp

QUESTIONS = {json.loads(line)["question"]: json.loads(line) for line in (Path(__file__).parents[1] / "data" /
             "sample_questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()}  # fmt: skip
# The fact each answer must state (from the question file's gold answer).
ANSWERABLE = {"How many days do I have to return an item?": "30",
              "How much does express shipping cost?": "14.99"}  # fmt: skip
UNANSWERABLE = ["Do you ship to Antarctica?", "What is the CEO's name?"]
PARSE_FAILURE = ("malformed reply", "no structured-output method worked", "no verdict")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with local_llm() as url:
        yield url


@pytest.fixture(scope="module")
def graph(server: str) -> Any:
    # A CPU-bound local model is slow: the operator's timeouts are raised, as anyone serving one would.
    return build_graph(settings={"backend": "model", "generator_model": f"openai:{MODEL}", "base_url": server,
                                 "llm_timeout": 600, "run_timeout": 3600})  # fmt: skip


@pytest.fixture(scope="module")
def results(graph: Any) -> dict[str, Any]:
    return {q: graph.invoke({"question": q}) for q in [*ANSWERABLE, *UNANSWERABLE]}


def parse_failures(result: dict[str, Any]) -> list[str]:
    return [f"{s['node']}: {s['error']}" for s in result["trace"] if any(p in (s.get("error") or "")
                                                                           for p in PARSE_FAILURE)]  # fmt: skip


@pytest.mark.parametrize("question", list(ANSWERABLE))
def test_answerable_questions_get_cited_answers(results: dict[str, Any], question: str) -> None:
    result = results[question]
    assert result["decision"] in ("answer", "answer_with_caveat"), result["trace"]
    assert ANSWERABLE[question] in result["answer"]
    assert any(c["doc_id"].endswith(QUESTIONS[question]["doc_id"]) for c in result["citations"]), result["citations"]
    assert all(f"[{c['ref']}]" in result["answer"] for c in result["citations"])
    assert result["llm_calls"] > 0 and result["tokens"] > 0  # usage as the server counted it


@pytest.mark.parametrize("question", UNANSWERABLE)
def test_unanswerable_questions_abstain(results: dict[str, Any], question: str) -> None:
    result = results[question]
    assert result["decision"] == "abstain", result["answer"]
    assert result["citations"] == []


def test_replies_that_cannot_be_parsed_stay_under_two_percent_of_calls(results: dict[str, Any]) -> None:
    calls = sum(r["llm_calls"] for r in results.values())
    failures = [f for r in results.values() for f in parse_failures(r)]
    assert calls > 0
    assert len(failures) <= 0.02 * calls, failures


def test_the_local_verifiers_score_reaches_the_offline_confidence(server: str, tmp_path: Path) -> None:
    """The offline backend with the local verifier on (the real model through the real ChatOpenAI, P(yes) from the
    server's logprobs): one `verify` step, and its score is the `verifier` feature of a calibration that uses it,
    pushing the confidence by weight x standardised score."""
    calibration = tmp_path / "with_verifier.json"
    calibration.write_text(json.dumps({"model": {"features": ["answer_relevance", "verifier"], "mean": [0.7, 0.5],
                                                 "scale": [0.2, 0.3], "weights": [1.0, 1.5], "bias": 0.0}}))
    graph = build_graph(settings={"backend": "offline", "verifier": f"openai:{MODEL}", "verifier_url": server,
                                  "calibration": str(calibration), "llm_timeout": 600, "run_timeout": 3600})
    result = graph.invoke({"question": "How many days do I have to return an item?"})
    [step] = [s for s in result["trace"] if s["node"] == "verify"]
    assert "error" not in step, step
    assert 0.0 <= step["score"] <= 1.0 and step["reply"]
    assert result["llm_calls"] == 1 and result["tokens"] > 0  # the verifier's one call, as the server counted it
    explained = result["confidence_explanation"]
    assert explained["signals"]["verifier"] == pytest.approx(step["score"], abs=1e-4)
    assert explained["contributions"]["verifier"] == pytest.approx(1.5 * (step["score"] - 0.5) / 0.3, abs=1e-3)
    fitted = load(calibration)
    assert result["confidence"] == pytest.approx(sigmoid(fitted.bias + sum(explained["contributions"].values())),
                                                 abs=1e-3)
