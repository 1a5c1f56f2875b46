"""Settings names on a real `langgraph dev` server: a misspelt key in a run's `context` is refused in one line naming
the nearest setting (the server would drop it, and the run would go on as if it had never been sent), settings a
client sends in `config.configurable` are taken as its context there, and an operator's value above its cap fails
every run in one line. (Starting at all shows langgraph.json, `$schema` included, is one `langgraph dev` reads.)"""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import UnprocessableEntityError
from support.langgraph_server import langgraph_dev

pytestmark = pytest.mark.system  # a langgraph dev server

RETURNS = "How many days do I have to return an item?"


@pytest.fixture(scope="module")
def server():
    with langgraph_dev() as url:
        client = get_sync_client(url=url)
        (assistant,) = client.assistants.search(graph_id="selfcrag")
        yield client, assistant["assistant_id"]


def run(client, assistant_id, **kwargs):  # noqa: ANN001, ANN003, ANN201
    """One run on a new thread: (final status, output)."""
    thread = client.threads.create()["thread_id"]
    started = client.runs.create(thread, assistant_id, input={"question": RETURNS}, **kwargs)
    output = client.runs.join(thread, started["run_id"])
    return client.runs.get(thread, started["run_id"])["status"], output


def passages(output) -> list[str]:  # noqa: ANN001
    return [step["decision"] for step in output["trace"] if step["node"] == "retrieve"]


@pytest.mark.parametrize(("context", "says"), [
    ({"max_retreival_rounds": 2}, "max_retreival_rounds: no such setting (did you mean max_retrieval_rounds?)"),
    ({"k": 2, "nonsense_key": 1}, "nonsense_key: no such setting"),
    ({"domian": "medical"}, "domian: no such setting (did you mean domain?)"),
])  # fmt: skip
def test_a_misspelt_setting_in_the_context_is_refused_naming_the_nearest(server, context, says):
    client, assistant_id = server
    thread = client.threads.create()["thread_id"]
    with pytest.raises(UnprocessableEntityError) as refused:
        client.runs.create(thread, assistant_id, input={"question": RETURNS}, context=context)
    assert says in refused.value.response.text
    # The error the SDK user sees is the one line itself, not a bare status.
    assert str(refused.value).startswith("invalid settings: ") and says in str(refused.value), str(refused.value)
    assert "\n" not in str(refused.value)
    # runs.wait and runs.stream raise httpx's error, with the line as its note (shown under the traceback).
    with pytest.raises(httpx.HTTPStatusError) as waited:
        client.runs.wait(thread, assistant_id, input={"question": RETURNS}, context=context)
    assert says in waited.value.response.json()["detail"] and says in " ".join(waited.value.__notes__)
    assert client.runs.list(thread) == []  # no run started


def test_settings_in_the_context_or_configurable_reach_the_run(server):
    client, assistant_id = server
    status, output = run(client, assistant_id, context={"k": 2})
    assert status == "success" and passages(output) == ["2 passages"]
    # The server copies `configurable` into the run's context: there it is not ignored (in Python it is, and said).
    status, output = run(client, assistant_id, config={"configurable": {"k": 1}})
    assert status == "success" and passages(output) == ["1 passages"]


def test_an_operator_value_above_its_cap_fails_every_run_in_one_line():
    with langgraph_dev({"SELFCRAG_MAX_RETRIEVAL_ROUNDS": "99"}) as url:
        client = get_sync_client(url=url)
        (assistant,) = client.assistants.search(graph_id="selfcrag")
        status, output = run(client, assistant["assistant_id"])
    assert status == "error"
    assert output["__error__"]["message"] == ("max_retrieval_rounds=99 is above its cap, cap_retrieval_rounds=5, in "
                                              "the same settings: lower it or raise the cap (from the environment: "
                                              "SELFCRAG_MAX_RETRIEVAL_ROUNDS='99')")
