"""Recording and replaying model calls (llm/replay.py) with the real ChatOpenAI against the local OpenAI-compatible
server: what the graders read (first-token logprobs, usage) survives a replay, the key holds every setting that
changes the reply, and a replayed `selfcrag eval` makes no request and decides as the recorded one did."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr
from support.openai_server import OpenAIServer, Reply
from support.replies import Plausible

from selfcrag.errors import CallNotRecorded
from selfcrag.llm.replay import CallFile, installed, recorded_calls

CLI = [sys.executable, "-m", "selfcrag.cli"]
SAMPLE_KB = Path(__file__).resolve().parents[2] / "src" / "selfcrag" / "data" / "sample_kb"
SAMPLE_QUESTIONS = Path(__file__).resolve().parents[1] / "data" / "sample_questions.jsonl"
MESSAGES = [SystemMessage("Answer yes or no."), HumanMessage("Is the passage about the question?")]


def model(server: OpenAIServer, **changed: object) -> ChatOpenAI:
    settings = {"model": "test-model", "temperature": 0.0, "max_tokens": 8, "logprobs": True, "top_logprobs": 2,
                **changed}
    return ChatOpenAI(base_url=server.base_url, api_key=SecretStr("test"), max_retries=0, **settings)  # type: ignore[arg-type]


def yes(_request: object) -> Reply:
    return Reply(text="Yes", first_token=[("Yes", 0.8), ("No", 0.2)])


def test_a_replayed_call_keeps_logprobs_and_usage_and_sends_nothing(tmp_path: Path):
    recorded = tmp_path / "calls.jsonl"
    with OpenAIServer(yes) as server, installed(CallFile(recorded)):
        live = model(server).invoke(MESSAGES)
    assert len(server.requests) == 1 and live.response_metadata["logprobs"]
    # Another server on another port, which would answer differently: the replay must not reach it.
    with OpenAIServer(lambda r: Reply(text="No")) as other, installed(CallFile(tmp_path / "again.jsonl",
                                                                               recorded)) as calls:  # fmt: skip
        replayed = model(other).invoke(MESSAGES)
    assert other.requests == [] and calls is not None and calls.hits == 1
    assert replayed.content == "Yes"
    first = replayed.response_metadata["logprobs"]["content"][0]["top_logprobs"]
    assert [(o["token"], round(math.exp(o["logprob"]), 6)) for o in first] == [("Yes", 0.8), ("No", 0.2)]
    assert replayed.usage_metadata is not None and live.usage_metadata is not None
    for count in ("input_tokens", "output_tokens", "total_tokens"):
        assert replayed.usage_metadata[count] == live.usage_metadata[count] > 0  # type: ignore[literal-required]
    # The replay's own file holds the call it rests on, so it can be replayed in turn.
    assert [json.loads(line)["key"] for line in (tmp_path / "again.jsonl").read_text().splitlines()] == \
        [json.loads(line)["key"] for line in recorded.read_text().splitlines()]


@pytest.mark.parametrize("change", [{"temperature": 0.7}, {"max_tokens": 9}, {"top_logprobs": 3},
                                    {"logprobs": False}, {"stop": ["\n"]}, {"model": "other-model"},
                                    {"logit_bias": {"9": -100}}, {"messages": True}])  # fmt: skip
def test_what_changes_the_reply_changes_the_key(tmp_path: Path, change: dict[str, object]):
    recorded = tmp_path / "calls.jsonl"
    with OpenAIServer(yes) as server, installed(CallFile(recorded)):
        model(server).invoke(MESSAGES)
    settings = {k: v for k, v in change.items() if k not in ("messages", "stop")}
    messages = [*MESSAGES[:1], HumanMessage("Is it?")] if "messages" in change else MESSAGES
    with (OpenAIServer(yes) as server, installed(CallFile(tmp_path / "replay.jsonl", recorded)) as calls,
          pytest.raises(CallNotRecorded, match="not in")):  # fmt: skip
        model(server, **settings).invoke(messages, stop=change.get("stop"))  # type: ignore[arg-type]
    assert server.requests == [] and calls is not None and calls.misses == 1


def test_a_copy_that_changes_a_setting_is_another_call_even_after_its_source_was_used(tmp_path: Path):
    # LangChain caches a model's serialised form, and model_copy copied that cache: a copy made after its source
    # had been called keyed as the source, so a logit_bias retry replayed the first reply (llm/models.copied).
    from selfcrag.llm.declines import banning, with_probabilities

    with OpenAIServer(yes) as server, installed(CallFile(tmp_path / "calls.jsonl")):
        source = model(server, logprobs=None, top_logprobs=None)
        source.invoke(MESSAGES)
        with_probabilities(source).invoke(MESSAGES)
        banning(with_probabilities(source), {9: -100}).invoke(MESSAGES)
    keys = [json.loads(line)["key"] for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 3


def test_a_miss_can_be_made_live_and_is_recorded(tmp_path: Path):
    recorded = tmp_path / "calls.jsonl"
    recorded.write_text("")
    with OpenAIServer(yes) as server, installed(CallFile(tmp_path / "new.jsonl", recorded, live_misses=True)) as calls:
        model(server).invoke(MESSAGES)
    assert len(server.requests) == 1 and calls is not None and (calls.hits, calls.misses) == (0, 1)
    assert len((tmp_path / "new.jsonl").read_text().splitlines()) == 1


def test_a_call_that_failed_when_recorded_fails_again_on_replay_and_is_retried_only_as_then(tmp_path: Path):
    from selfcrag.context import Context
    from selfcrag.llm.calls import call

    settings, replies = Context(llm_timeout=20), iter([Reply.fail(503), yes(None)])
    recorded = tmp_path / "calls.jsonl"
    with OpenAIServer(lambda _r: next(replies)) as server, installed(CallFile(recorded)):
        live = call(model(server), MESSAGES, settings)
    assert live.error is None and live.calls == 2 and len(server.requests) == 2
    rows = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert [("fault" in r, r.get("fault", {}).get("retried")) for r in rows] == [(True, True), (False, None)]
    assert rows[0]["fault"]["status"] == 503 and rows[0]["key"] == rows[1]["key"]
    # Replayed against a server that would answer at once: the 503 again, the same retry, the same reply.
    with OpenAIServer(yes) as other, installed(CallFile(tmp_path / "again.jsonl", recorded)) as calls:
        replayed = call(model(other), MESSAGES, settings)
    assert other.requests == [] and calls is not None and calls.hits == 2
    assert (replayed.error, replayed.calls, replayed.output.content) == (None, 2, "Yes")
    # A fault it gave up on (a 400 is not worth another try) ends the replayed call the same way, in the same words.
    with OpenAIServer(lambda _r: Reply.fail(400, "no such model")) as server, installed(CallFile(recorded)):
        refused = call(model(server), MESSAGES, settings)
    with OpenAIServer(yes) as other, installed(CallFile(tmp_path / "again.jsonl", recorded)):
        again = call(model(other), MESSAGES, settings)
    assert other.requests == [] and refused.calls == again.calls == 1
    assert again.reason == refused.reason and "400" in again.reason


def test_a_reply_that_comes_after_its_call_gave_up_is_not_recorded(tmp_path: Path):
    import time

    from selfcrag.context import Context
    from selfcrag.llm.calls import call

    def late(_request: object) -> Reply:
        time.sleep(1.5)
        return yes(None)

    recorded = tmp_path / "calls.jsonl"
    with OpenAIServer(late) as server, installed(CallFile(recorded)):
        timed_out = call(model(server), MESSAGES, Context(llm_timeout=0.5))
        time.sleep(2.0)  # the abandoned call finishes in its thread meanwhile
    assert "TotalTimeoutError" in timed_out.reason
    rows = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert ["fault" in r for r in rows] == [True]  # its fault, not the reply the run never read
    with OpenAIServer(yes) as other, installed(CallFile(tmp_path / "again.jsonl", recorded)):
        replayed = call(model(other), MESSAGES, Context(llm_timeout=0.5))
    assert other.requests == [] and replayed.reason == timed_out.reason and replayed.calls == timed_out.calls


def test_a_damaged_calls_file_is_one_line(tmp_path: Path):
    bad = tmp_path / "calls.jsonl"
    bad.write_text('{"key": "a", "reply": []}\nnot json\n')
    with pytest.raises(CallNotRecorded, match="line 2 is not a recorded call"):
        CallFile(tmp_path / "out.jsonl", bad)
    with pytest.raises(CallNotRecorded, match="cannot read"):
        CallFile(tmp_path / "out.jsonl", tmp_path / "missing.jsonl")


def test_a_gzipped_calls_file_replays_as_the_plain_one(tmp_path: Path):
    # Results kept in the repository hold their calls gzipped: a run folder with calls.jsonl.gz replays as it is.
    import gzip

    with OpenAIServer(yes) as server, installed(CallFile(tmp_path / "live" / "calls.jsonl")):
        (tmp_path / "live").mkdir()
        model(server).invoke(MESSAGES)
        made = len(server.requests)
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "calls.jsonl.gz").write_bytes(gzip.compress((tmp_path / "live" / "calls.jsonl").read_bytes()))
    assert recorded_calls(kept) == kept / "calls.jsonl.gz" and recorded_calls(tmp_path / "live").name == "calls.jsonl"
    with OpenAIServer(yes) as server, installed(calls := CallFile(tmp_path / "again.jsonl", recorded_calls(kept))):
        assert model(server).invoke(MESSAGES).content == "Yes"
        assert calls.hits == made == 1 and not server.requests
    (kept / "calls.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(CallNotRecorded, match="cannot read recorded calls"):
        CallFile(tmp_path / "out.jsonl", recorded_calls(kept))


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600, env=env)


def test_a_replayed_eval_makes_no_model_call_and_decides_the_same(tmp_path: Path):
    rows = [json.loads(line) for line in SAMPLE_QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    with (tmp_path / "questions.jsonl").open("w", encoding="utf-8") as sink:
        for i in (0, 5, 26):
            sink.write(json.dumps({"id": f"q{i}", "question": rows[i]["question"],
                                   "answers": [rows[i]["answer"]] if rows[i]["answerable"] else [],
                                   "is_impossible": not rows[i]["answerable"]}) + "\n")  # fmt: skip
    env = {**os.environ}
    assert run("ingest", str(SAMPLE_KB), "--index", str(tmp_path / "index"), env=env).returncode == 0
    common = [str(tmp_path / "questions.jsonl"), "--index", str(tmp_path / "index"), "--baseline", "plain"]
    with OpenAIServer(Plausible().responder()) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
        first = run("eval", *common, "--out", str(tmp_path / "live"), env=env)
        assert first.returncode == 0, first.stderr
        made = len(server.requests)
        replayed = run("eval", *common, "--out", str(tmp_path / "replayed"), "--replay", str(tmp_path / "live"),
                       env=env)  # fmt: skip
        assert replayed.returncode == 0, replayed.stderr
        assert len(server.requests) == made  # not one request more
        # A prompt the recording never saw is one line, and its record is not written.
        (tmp_path / "other.jsonl").write_text(json.dumps({"id": "new", "question": "Who wrote the sample?",
                                                          "answers": ["nobody"]}) + "\n")  # fmt: skip
        missing = run("eval", str(tmp_path / "other.jsonl"), "--index", str(tmp_path / "index"), "--out",
                      str(tmp_path / "missing"), "--replay", str(tmp_path / "live" / "calls.jsonl"), env=env)
        assert len(server.requests) == made
    assert missing.returncode != 0 and "not hold" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    before, after = ([json.loads(line) for line in (tmp_path / name / "records.jsonl").read_text().splitlines()]
                     for name in ("live", "replayed"))  # fmt: skip
    assert made == sum(r["llm_calls"] for r in before) > 0
    assert [(r["id"], r["system"], r["decision"], r["answer"], r["confidence"], r["llm_calls"], r["tokens"])
            for r in before] == [(r["id"], r["system"], r["decision"], r["answer"], r["confidence"], r["llm_calls"],
                                  r["tokens"]) for r in after]  # fmt: skip
    assert [r["replayed_calls"] for r in after] == [r["llm_calls"] for r in after]
    assert json.loads((tmp_path / "replayed" / "metrics.json").read_text())["systems"]["selfcrag"]["llm_calls"][
        "replayed"] == sum(r["llm_calls"] for r in after if r["system"] == "selfcrag")


def test_calibrate_refits_and_redecides_from_records_alone(tmp_path: Path):
    """Committed tuning records of the 0.5B model: no index, no model server, one command."""
    records = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / \
        "calibration_fit_model_question_terms_checked_records.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    done = run("calibrate", "--records", str(records), "--out", str(tmp_path / "fit.json"), env=env)
    assert done.returncode == 0, done.stderr
    assert "re-decided at cost 0.75" in done.stdout and "plain" in done.stdout
    assert json.loads((tmp_path / "fit.json").read_text())["model"]["features"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    refused = run("calibrate", "--records", str(bad), "--out", str(tmp_path / "x.json"), env=env)
    assert refused.returncode != 0 and "line 1 is not a selfcrag eval record" in refused.stderr
