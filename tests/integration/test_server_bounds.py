"""State a client cannot forge, on a real `langgraph dev` server driven by `langgraph_sdk` (issue 23): a thread
updated with forged counters and resumed with `input=None` is bounded by the operator's caps, and a run that names
a calibration file is refused before the file is opened. The model is the local OpenAI-compatible server, which
counts every call; nothing here depends on the server's authentication (the fix holds without it)."""

from __future__ import annotations

import os

import httpx
import pytest
from langgraph_sdk import get_sync_client
from support.forged import CAP, FORGED, QUESTION, RESTART
from support.langgraph_server import langgraph_dev
from support.openai_server import OpenAIServer
from support.replies import never_satisfied

from selfcrag.store import runs

pytestmark = pytest.mark.system  # a langgraph dev server


@pytest.fixture(scope="module")
def server():  # noqa: ANN201
    with OpenAIServer(never_satisfied()) as model:
        env = {"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": model.base_url, "SELFCRAG_CAP_LLM_CALLS": str(CAP)}
        with langgraph_dev(env) as url:
            client = get_sync_client(url=url)
            (assistant,) = client.assistants.search(graph_id="selfcrag")
            yield client, assistant["assistant_id"], model


def calls_during(model: OpenAIServer, work):  # noqa: ANN001, ANN201
    before = len(model.requests)
    result = work()
    return result, len(model.requests) - before


def test_a_thread_updated_with_forged_counters_and_resumed_stays_within_the_caps(server):
    client, assistant_id, model = server
    thread = client.threads.create()["thread_id"]
    first, made = calls_during(model, lambda: client.runs.wait(thread, assistant_id, input={"question": QUESTION}))
    assert 0 < first["llm_calls"] == made <= CAP
    client.threads.update_state(thread, {**FORGED, **RESTART}, as_node="prepare")
    resumed, made = calls_during(model, lambda: client.runs.wait(thread, assistant_id, input=None))
    assert 0 < made <= CAP  # without the ledger: 169 calls against this cap
    assert resumed["llm_calls"] == made and resumed["tokens"] >= 0
    steps = [step["node"] for step in resumed["trace"]]
    assert steps.count("retrieve") <= 3 and steps.count("generate") <= 2 * 3
    recorded = [row for row in runs.recent(0) if row["thread_id"] == thread]  # what `selfcrag monitor` sums
    assert recorded and all(0 <= row["llm_calls"] <= CAP for row in recorded)


@pytest.mark.parametrize("path", ["/dev/zero", "FIFO", "/etc/hostname", "/no/such/file"])
def test_a_run_naming_a_calibration_file_is_refused_in_one_line_without_opening_it(server, tmp_path, path):
    client, assistant_id, model = server
    if path == "FIFO":
        path = str(tmp_path / "calibration.fifo")
        os.mkfifo(path)  # a reader blocks on it for ever: opening it froze the whole server
    thread = client.threads.create()["thread_id"]
    before = len(model.requests)
    with pytest.raises(httpx.HTTPStatusError) as refused:  # at the door: the graph does not publish calibration
        client.runs.create(thread, assistant_id, input={"question": QUESTION}, context={"calibration": path})
    assert refused.value.response.status_code == 403 and client.runs.list(thread) == []
    message = refused.value.response.json()["detail"]
    assert message.startswith("calibration is an operator setting: a run may not choose it")
    assert path not in message and "\n" not in message  # the same line for any file
    assert len(model.requests) == before
    after = client.runs.wait(client.threads.create()["thread_id"], assistant_id, input={"question": QUESTION})
    assert after["decision"]  # the server still answers
