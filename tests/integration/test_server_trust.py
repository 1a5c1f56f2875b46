"""The trust boundary on a real `langgraph dev` server driven by `langgraph_sdk`: a client chooses run settings
within the operator's caps, never an operator setting, and the operator's key reaches only the operator's endpoint.

The server is configured as an operator would: OPENAI_API_KEY and OPENAI_BASE_URL point at a local
OpenAI-compatible server. A second local server plays the attacker's endpoint that a client tries to send runs to.
"""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_sync_client
from support.langgraph_server import langgraph_dev
from support.openai_server import OpenAIServer
from support.replies import Plausible

pytestmark = pytest.mark.system  # a langgraph dev server

OPERATOR_KEY = "sk-operator-secret-0123456789"
RETURNS = "How many days do I have to return an item?"


@pytest.fixture(scope="module")
def servers():
    with OpenAIServer(Plausible().responder()) as operator, OpenAIServer(Plausible().responder()) as attacker:
        env = {"OPENAI_API_KEY": OPERATOR_KEY, "OPENAI_BASE_URL": operator.base_url}
        with langgraph_dev(env) as url:
            client = get_sync_client(url=url)
            (assistant,) = client.assistants.search(graph_id="selfcrag")
            yield client, assistant["assistant_id"], operator, attacker


def run(client, assistant_id, context):  # noqa: ANN001, ANN201
    """One run; (final status, the run's output or error payload). A run the server refuses to create (an
    operator setting it does not publish, refused by selfcrag/auth.py) is ("refused", its 403's one line)."""
    thread = client.threads.create()["thread_id"]
    try:
        started = client.runs.create(thread, assistant_id, input={"question": RETURNS}, context=context)
    except httpx.HTTPStatusError as exc:
        assert exc.response.status_code in (403, 422) and client.runs.list(thread) == []  # no run was made
        return "refused", {"__error__": {"error": "SettingsError", "message": exc.response.json()["detail"]}}
    output = client.runs.join(thread, started["run_id"])
    return client.runs.get(thread, started["run_id"])["status"], output


def error_text(output) -> str:  # noqa: ANN001
    error = output.get("__error__") if isinstance(output, dict) else None
    return f"{error.get('error')}: {error.get('message')}" if isinstance(error, dict) else str(output)


@pytest.mark.parametrize("context", [
    {"base_url": "ATTACKER"},
    {"backend": "model", "base_url": "ATTACKER"},
    {"generator_model": "openai:gpt-4o", "base_url": "ATTACKER"},
])  # fmt: skip
def test_a_client_cannot_send_runs_or_the_key_to_another_endpoint(servers, context):
    client, assistant_id, operator, attacker = servers
    before = len(operator.requests)
    asked = {name: attacker.base_url if value == "ATTACKER" else value for name, value in context.items()}
    status, output = run(client, assistant_id, asked)
    assert status == "refused"  # before any run: the server does not publish base_url, selfcrag's door refuses it
    assert "is an operator setting" in error_text(output) or "are operator settings" in error_text(output)
    assert "base_url" in error_text(output)
    assert attacker.requests == []  # nothing, and so no key, went to the client's endpoint
    assert len(operator.requests) == before  # the refused run made no model call at all


@pytest.mark.parametrize(("context", "expected", "how"), [
    ({"index_dir": "/"}, "index_dir is an operator setting", "refused"),
    ({"embeddings": "openai:text-embedding-3-small"}, "embeddings is an operator setting", "refused"),
    ({"llm_timeout": "abc"}, "llm_timeout: Input should be a valid number", "refused"),
    ({"max_retrieval_rounds": 2000}, "max_retrieval_rounds=2000 is above this deployment's cap of 5", "error"),
    ({"max_llm_calls": 100000}, "max_llm_calls=100000 is above this deployment's cap of 40", "error"),
    ({"k": 10000}, "k=10000 is above this deployment's cap of 20", "error"),
    ({"max_llm_calls": "abc"}, "max_llm_calls: Input should be a valid integer", "error"),
    ({"k": -1}, "k: Input should be greater than or equal to 1", "error"),
    ({"domain": "astrology"}, "domain: Input should be", "error"),
])  # fmt: skip  (operator settings: refused at the door, before any run; run settings: by the run's first step)
def test_operator_settings_caps_and_bad_values_are_refused_in_one_line(servers, context, expected, how):
    client, assistant_id, operator, _ = servers
    before = len(operator.requests)
    status, output = run(client, assistant_id, context)
    assert status == how
    assert expected in error_text(output)
    assert "Traceback" not in error_text(output)
    assert len(operator.requests) == before


def test_run_settings_within_the_caps_run_and_the_key_reaches_only_the_operators_endpoint(servers):
    client, assistant_id, operator, attacker = servers
    status, output = run(client, assistant_id, {"max_retrieval_rounds": 2, "k": 4, "domain": "customer_service"})
    assert status == "success", error_text(output)
    assert "30 days" in output["answer"]
    assert output["llm_calls"] > 0  # the operator configured a model: the run used it
    assert operator.requests and {r.authorization for r in operator.requests} == {f"Bearer {OPERATOR_KEY}"}
    assert attacker.requests == []


def test_a_form_that_repeats_the_operators_values_or_the_defaults_is_accepted(servers):
    """Studio's settings form may send every field; the operator's own values and the defaults change nothing."""
    client, assistant_id, operator, _ = servers
    status, output = run(client, assistant_id, {"base_url": "", "backend": "auto", "index_dir": "", "k": 5})
    assert status == "success", error_text(output)
    assert {r.authorization for r in operator.requests} == {f"Bearer {OPERATOR_KEY}"}
