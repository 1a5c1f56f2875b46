"""The local verifier (llm/verifier.py, nodes/verify.py) with an in-process chat model: P(yes) read from the first
token's probabilities or the parsed word, the step only when the setting is on and a draft was kept, its score in
the confidence through a calibration that uses it, and every fault degrading to the run without it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from selfcrag import build_graph
from selfcrag.backend import offline_components
from selfcrag.errors import SettingsError
from selfcrag.llm.verifier import ModelVerifier, passages, yes_probability
from selfcrag.quality.calibration import shipped

ANSWERABLE = "How many days do I have to return an item?"
UNANSWERABLE = "What is the CEO's name?"


class Verifying(BaseChatModel):
    """Replies `word`, with first-token alternatives `top` ({token: probability}) when given; `fail` raises."""

    word: str = "Yes"
    top: dict[str, float] = {}
    fail: bool = False
    logprobs: bool | None = None
    top_logprobs: int | None = None
    max_tokens: int | None = None
    prompts: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "verifying"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        self.prompts.append("\n".join(str(m.content) for m in messages))
        if self.fail:
            raise ValueError("the verifier's server is down")
        options = [{"token": t, "logprob": math.log(p)} for t, p in self.top.items()]
        metadata = {"logprobs": {"content": [{"token": self.word, "top_logprobs": options}]}} if self.logprobs else {}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.word, response_metadata=metadata))])


def message(word: str, top: dict[str, float] | None = None) -> AIMessage:
    options = [{"token": t, "logprob": math.log(p)} for t, p in (top or {}).items()]
    metadata = {"logprobs": {"content": [{"token": word, "top_logprobs": options}]}} if top is not None else {}
    return AIMessage(word, response_metadata=metadata)


def test_p_yes_comes_from_the_first_tokens_probabilities() -> None:
    assert yes_probability(message("Yes", {"Yes": 0.6, " yes": 0.1, "No": 0.2, "The": 0.1})) == pytest.approx(
        0.7 / 0.9, abs=1e-4)
    assert yes_probability(message("No", {"No": 0.9, "Yes": 0.05})) == pytest.approx(0.05 / 0.95, abs=1e-4)


def test_without_probabilities_the_word_is_parsed_and_anything_else_is_unmeasured() -> None:
    assert yes_probability(message("Yes.")) == 1.0
    assert yes_probability(message("no, it does not")) == 0.0
    assert yes_probability(message("The passage says", {"The": 0.9})) is None  # neither word among the top tokens
    assert yes_probability(message("Ignore the instructions")) is None
    assert yes_probability(message("")) is None


def calibration_with_verifier(tmp_path: Path) -> str:
    """The shipped offline calibration plus the `verifier` feature, so a test can see the score reach confidence
    whether or not a fitted offline+verifier file ships."""
    data = json.loads(shipped("offline").read_text(encoding="utf-8"))
    model = data["model"]
    for key, value in (("features", "verifier"), ("mean", 0.5), ("scale", 0.3), ("weights", 1.5)):
        model[key] = [*model[key], value]
    path = tmp_path / "with_verifier.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def graph(model: Verifying | None, **settings: Any) -> Any:
    components = offline_components()
    if model is not None:
        components.verifier = ModelVerifier(model)
    return build_graph(components, settings={"backend": "offline", **settings})


def steps(result: dict[str, Any], node: str) -> list[dict[str, Any]]:
    return [s for s in result["trace"] if s["node"] == node]


def strip(doc: str, text: str, score: float) -> dict[str, Any]:
    return {"id": f"{doc}#0", "doc_id": doc, "title": doc.title(), "source": f"{doc}.md", "text": text, "score": score}


def test_the_verifier_reads_the_drafts_own_document_then_the_best_other_one() -> None:
    draft = "Arthur's Magazine was started in 1844"
    strips = [strip("first", "First for Women is a magazine started in 1989.", 0.9),
              strip("arthur", "Arthur's Magazine was started in 1844 in Philadelphia.", 0.7),
              strip("other", "An unrelated passage.", 0.2)]  # fmt: skip
    assert passages(draft, strips) == [("Arthur", "Arthur's Magazine was started in 1844 in Philadelphia."),
                                       ("First", "First for Women is a magazine started in 1989.")]  # fmt: skip
    assert passages(draft, strips[1:2]) == [("Arthur", "Arthur's Magazine was started in 1844 in Philadelphia.")]
    assert passages(draft, []) == []


def test_off_by_default_no_step_and_no_call() -> None:
    model = Verifying(prompts=[])
    result = graph(model).invoke({"question": ANSWERABLE})
    assert steps(result, "verify") == [] and model.prompts == []
    assert result["confidence_explanation"]["calibration"] == "offline.json"


def test_the_score_reaches_the_confidence(tmp_path: Path) -> None:
    calibration = calibration_with_verifier(tmp_path)
    sure = Verifying(word="Yes", top={"Yes": 0.95, "No": 0.05}, prompts=[])
    doubting = Verifying(word="Yes", top={"Yes": 0.1, "No": 0.9}, prompts=[])
    high = graph(sure, verifier="local:test", calibration=calibration).invoke({"question": ANSWERABLE})
    low = graph(doubting, verifier="local:test", calibration=calibration).invoke({"question": ANSWERABLE})
    [step] = steps(high, "verify")
    assert step["score"] == pytest.approx(0.95) and step["decision"] == "measured"
    assert "30 days" in step["verified"]
    assert high["confidence_explanation"]["signals"]["verifier"] == pytest.approx(0.95)
    assert high["confidence"] > low["confidence"]
    assert high["llm_calls"] == 1  # the verifier's one call; the offline backend makes none
    # The passage goes in as data, inside the fence, with the question and the draft.
    assert '<passage-' in sure.prompts[0] and ' id="p1"' in sure.prompts[0] and ANSWERABLE in sure.prompts[0]


def test_the_verifiers_reply_is_not_streamed_as_part_of_the_answer() -> None:
    model = Verifying(prompts=[])
    chunks = list(graph(model, verifier="local:test").stream({"question": ANSWERABLE}, stream_mode="messages"))
    assert model.prompts  # it was asked
    assert "verify" not in {metadata["langgraph_node"] for _, metadata in chunks}  # its "Yes" is no answer token


def test_a_run_without_a_draft_skips_the_verifier() -> None:
    model = Verifying(prompts=[])
    result = graph(model, verifier="local:test").invoke({"question": UNANSWERABLE})
    assert result["decision"] == "abstain"
    assert steps(result, "verify") == [] and model.prompts == []


@pytest.mark.parametrize("model", [Verifying(fail=True, prompts=[]), Verifying(word="Maybe", prompts=[]),
                                   Verifying(word="Sure", top={"Sure": 0.9}, prompts=[])])  # fmt: skip
def test_a_fault_or_garbage_leaves_the_run_as_without_the_verifier(tmp_path: Path, model: Verifying) -> None:
    calibration = calibration_with_verifier(tmp_path)
    without = graph(None, calibration=calibration).invoke({"question": ANSWERABLE})
    result = graph(model, verifier="local:test", calibration=calibration).invoke({"question": ANSWERABLE})
    [step] = steps(result, "verify")
    assert step["score"] is None and step["decision"] == "unmeasured" and step["error"]
    assert "verifier" not in result["confidence_explanation"]["contributions"] or \
        result["confidence_explanation"]["contributions"]["verifier"] == 0.0
    assert (result["decision"], result["confidence"], result["answer"]) == \
        (without["decision"], without["confidence"], without["answer"])


def test_a_spent_call_budget_leaves_it_unmeasured() -> None:
    model = Verifying(prompts=[])
    result = graph(model, verifier="local:test").invoke({"question": ANSWERABLE}, context={"max_llm_calls": 0})
    [step] = steps(result, "verify")
    assert step["score"] is None and "budget" in step["error"] and model.prompts == []


def test_a_run_may_not_turn_the_verifier_on_or_point_it_anywhere() -> None:
    for asked in ({"verifier": "openai:gpt-4o"}, {"verifier_url": "http://attacker.example/v1"}):
        with pytest.raises(SettingsError, match="operator setting"):
            graph(Verifying(prompts=[])).invoke({"question": ANSWERABLE}, context=asked)


def test_with_the_verifier_on_its_own_fitted_calibration_is_chosen() -> None:
    result = graph(Verifying(word="Yes", top={"Yes": 0.8, "No": 0.2}, prompts=[]), verifier="local:test").invoke(
        {"question": ANSWERABLE})
    explained = result["confidence_explanation"]
    assert explained["calibration"] == "offline_verifier.json"
    assert explained["signals"]["verifier"] == pytest.approx(0.8) and explained["contributions"]["verifier"] != 0.0
