"""The one place model calls go through (llm/calls.py), with in-process chat models: the run's budget
shared by concurrent calls, deadlines, retries and Retry-After, reply caps, the linear lenient parser, the key
rule. Time bounds only where the bound is the feature, with generous slack."""

from __future__ import annotations

import contextvars
import threading
import time
from email.utils import formatdate
from typing import Any

import httpx
import openai
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_openai import ChatOpenAI

from selfcrag.context import Context
from selfcrag.knowledge.embeddings import openai_embedder
from selfcrag.ledger import RunLedger
from selfcrag.llm.calls import MAX_TOKENS, call, run_limits
from selfcrag.llm.faults import retry_after
from selfcrag.llm.models import ChatModels, chat_model, with_max_tokens
from selfcrag.llm.relevance import PassageGrades
from selfcrag.llm.structured import ask, loads_lenient

SLACK = 4.0
GRADE = '{"grades": [{"id": "p1", "label": "correct"}]}'


class Scripted(BaseChatModel):
    """A chat model that plays `script` in turn: a text reply, or an exception to raise. `hold` blocks a call
    until it is set (a server that never answers)."""

    script: list[Any]
    calls: list[float] = []
    hold: Any = None

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN202
        self.calls.append(time.monotonic())
        if self.hold is not None:
            self.hold.wait(30)
        said = self.script[min(len(self.calls), len(self.script)) - 1]
        if isinstance(said, BaseException):
            raise said
        return ChatResult(generations=[ChatGeneration(message=AIMessage(said))])

    @property
    def _llm_type(self) -> str:
        return "scripted"


def status_error(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(status, request=request, headers=headers or {})
    return openai.APIStatusError(f"status {status}", response=response, body=None)


def grade(model: Scripted, settings: Context | None = None):  # noqa: ANN201
    return ask(ChatModels(model), model, PassageGrades, [HumanMessage("grade")], settings or Context(), "relevance")


# --- the budget -------------------------------------------------------------------------------------------------------


def test_concurrent_calls_of_one_superstep_share_the_budget():
    model = Scripted(script=[GRADE])
    settings = Context(max_llm_calls=5)
    replies = []

    ledger = RunLedger(calls=2)  # the run's, shared by the nodes of a superstep

    def node() -> None:  # each like a node of the same superstep
        with run_limits(settings, ledger):
            replies.append(grade(model, settings))

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(node,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(model.calls) == 3  # 5 - 2: no more, however many ask at once
    assert sum(r.calls for r in replies) == 3
    skipped = [r for r in replies if r.value is None]
    assert len(skipped) == 5 and all("budget (max_llm_calls=5) is spent" in r.error for r in skipped)


def test_retries_count_as_calls_and_stop_at_the_budget():
    model = Scripted(script=[status_error(503, {"retry-after": "0"})] * 3)
    with run_limits(Context(max_llm_calls=2), RunLedger()):
        reply = grade(model, Context(max_llm_calls=2))
    assert len(model.calls) == 2 and reply.calls == 2
    assert "503" in reply.error and "not retried" in reply.error and "budget" in reply.error


def test_no_time_left_in_the_run_means_no_call():
    model = Scripted(script=[GRADE])
    settings = Context(run_timeout=60)
    with run_limits(settings, RunLedger(started=time.monotonic() - 61)):
        reply = grade(model, settings)
    assert model.calls == [] and reply.calls == 0
    assert "run_timeout=60 s) is spent" in reply.error


# --- retries and deadlines ------------------------------------------------------------------------------------------


def test_transient_faults_are_retried_and_each_attempt_counted():
    model = Scripted(script=[status_error(503, {"retry-after": "0"}), openai.APITimeoutError(
        request=httpx.Request("POST", "http://x")), GRADE])  # fmt: skip
    reply = grade(model, Context())
    assert reply.value is not None and reply.calls == 3 and reply.error == ""


def test_a_fault_that_is_not_transient_is_not_retried():
    model = Scripted(script=[status_error(401), GRADE])
    reply = grade(model)
    assert reply.value is None and reply.calls == 1 and "401" in reply.error


def test_retry_after_is_waited_for_when_it_fits_and_not_otherwise():
    model = Scripted(script=[status_error(429, {"retry-after": "1"}), GRADE])
    assert grade(model, Context(llm_timeout=10)).value is not None
    assert model.calls[1] - model.calls[0] >= 0.9
    beyond = Scripted(script=[status_error(429, {"retry-after": "60"}), GRADE])
    start = time.monotonic()
    reply = grade(beyond, Context(llm_timeout=5))
    assert time.monotonic() - start < 5
    assert len(beyond.calls) == 1 and "retry after 60 s, beyond the call's deadline" in reply.error


def test_retry_after_reads_seconds_milliseconds_and_http_dates():
    now = time.time()
    assert retry_after(status_error(429, {"retry-after": "7"})) == 7
    assert retry_after(status_error(429, {"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert retry_after(status_error(503, {"retry-after": formatdate(now + 30, usegmt=True)}), now) == pytest.approx(
        30, abs=1)
    assert retry_after(status_error(503, {"retry-after": formatdate(now - 30, usegmt=True)}), now) == 0
    assert retry_after(status_error(503, {"retry-after": "soon"})) is None
    assert retry_after(status_error(503)) is None
    assert retry_after(ValueError("no response")) is None


def test_a_call_that_never_returns_ends_at_its_deadline():
    release = threading.Event()
    model = Scripted(script=[GRADE], hold=release)
    start = time.monotonic()
    outcome = call(model, [HumanMessage("hi")], Context(llm_timeout=0.5))
    release.set()
    assert time.monotonic() - start < 0.5 + SLACK
    assert outcome.calls == 1 and "TotalTimeoutError: no complete reply within 0.5 s (llm_timeout)" in outcome.reason


def test_the_run_deadline_caps_a_call():
    release = threading.Event()
    model = Scripted(script=[GRADE], hold=release)
    settings = Context(llm_timeout=30, run_timeout=1)
    start = time.monotonic()
    with run_limits(settings, RunLedger()):
        outcome = call(model, [HumanMessage("hi")], settings)
    release.set()
    assert time.monotonic() - start < 1 + SLACK
    assert "(the run's remaining time)" in outcome.reason


@pytest.mark.parametrize("fault", [RecursionError("deep"), MemoryError(), KeyError("x"), RuntimeError("boom")])
def test_no_exception_leaves_a_call(fault):
    reply = grade(Scripted(script=[fault]))
    assert reply.value is None and reply.calls == 1 and type(fault).__name__ in reply.error


# --- replies: size caps and the lenient parser -----------------------------------------------------------------------


@pytest.mark.parametrize("text", ["[" * 2048, "{" * 100_000, '{"a": ' * 5000, "[" * 40 + "]" * 40])
def test_deeply_nested_replies_are_malformed_not_a_crash(text):
    reply = grade(Scripted(script=[text]))
    assert reply.value is None and reply.error.startswith("malformed reply")
    with pytest.raises(ValueError):
        loads_lenient(text, limit=10**6)


def test_a_reply_longer_than_its_cap_is_refused():
    reply = grade(Scripted(script=[GRADE + " more" * 2000]))
    assert reply.value is None and "characters, more than the 1280" in reply.error  # relevance: 160 tokens x 8


def test_json_followed_by_megabytes_of_text_is_parsed_in_linear_time():
    text = '{"label": "correct"}' + " and then some text [with brackets] {and braces}" * 40_000  # ~2 MB
    start = time.monotonic()
    assert loads_lenient(text, limit=10**7) == {"label": "correct"}
    assert loads_lenient("x" * 2_000_000 + ' {"a": 1}', limit=10**7) == {"a": 1}
    assert time.monotonic() - start < 10  # was quadratic: 25 s for 20 KB


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('I\'m sure: {"a": [1, 2], "b": "x}y"} done', {"a": [1, 2], "b": "x}y"}),
        ('see [1 for details: {"a": 1}', {"a": 1}),  # a bracket that never closes hides nothing
        ('[doc_1] says {"a": 1,}', {"a": 1}),
        ("{'a': True, 'b': None}", {"a": True, "b": None}),
        ('```json\n[{"id": "p1"}]\n```', [{"id": "p1"}]),
    ],
)
def test_the_lenient_parser_finds_json_among_prose(text, found):
    assert loads_lenient(text) == found


def test_the_lenient_parser_refuses_a_reply_over_its_limit():
    with pytest.raises(ValueError, match="more than the 10 allowed"):
        loads_lenient('{"a": 1}     ', limit=10)


# --- max_tokens and keys -------------------------------------------------------------------------------------------


def test_max_tokens_is_set_on_a_copy_and_a_lower_cap_of_the_caller_stays():
    llm = ChatOpenAI(model="m", api_key="k", base_url="http://127.0.0.1:9/v1")
    capped = with_max_tokens(llm, MAX_TOKENS["answer"])
    assert capped.max_tokens == MAX_TOKENS["answer"] and llm.max_tokens is None
    assert capped.root_client is llm.root_client  # the same connection pool
    tight = ChatOpenAI(model="m", api_key="k", base_url="http://127.0.0.1:9/v1", max_tokens=50)
    assert with_max_tokens(tight, 1024) is tight
    plain = Scripted(script=[GRADE])
    assert with_max_tokens(plain, 1024) is plain  # no known field: used as it is, its reply cut to size


@pytest.mark.parametrize(
    ("env", "base_url", "key"),
    [
        ({"OPENAI_API_KEY": "sk-op"}, "", "sk-op"),  # api.openai.com
        ({"OPENAI_API_KEY": "sk-op"}, "https://api.openai.com/v1/", "sk-op"),
        ({"OPENAI_API_KEY": "sk-op"}, "http://evil.example/v1", "not-needed"),
        ({"OPENAI_API_KEY": "sk-op", "SELFCRAG_API_KEY": "sk-x"}, "http://evil.example/v1", "sk-x"),
        ({"OPENAI_API_KEY": "sk-op", "OPENAI_BASE_URL": "http://vllm:8000/v1"}, "", "sk-op"),
        ({"OPENAI_API_KEY": "sk-op", "OPENAI_BASE_URL": "http://vllm:8000/v1"}, "http://VLLM:8000/v1/", "sk-op"),
        ({"OPENAI_API_KEY": "sk-op", "OPENAI_BASE_URL": "http://vllm:8000/v1"}, "https://api.openai.com/v1",
         "not-needed"),
        ({"OPENAI_BASE_URL": "http://vllm:8000/v1"}, "", "not-needed"),
    ],
)
def test_the_operator_key_goes_only_where_it_was_configured_to(monkeypatch, env, base_url, key):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "SELFCRAG_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    model = chat_model("openai:m", temperature=0, timeout=5, base_url=base_url)
    assert model.openai_api_key.get_secret_value() == key
    if not base_url and "OPENAI_BASE_URL" in env:
        assert openai_embedder("e")._embeddings.openai_api_key.get_secret_value() == key


def test_the_run_deadlines_are_operator_settings_a_run_cannot_open():
    from selfcrag.errors import SettingsError
    from selfcrag.trust_boundary import resolve

    base = Context(run_timeout=60)
    with pytest.raises(SettingsError, match="run_timeout is an operator setting"):
        resolve({"run_timeout": 10_000}, base)
    with pytest.raises(SettingsError, match="allow_per_run"):
        Context(allow_per_run=("web_timeout",))


def test_concurrent_nodes_get_their_first_calls_in_turn_whoever_asks_first():
    # One call left when the superstep began; the node second in turn asks first and still goes without.
    settings = Context(max_llm_calls=3)
    ledger = RunLedger(calls=2)
    first_done, asked = threading.Event(), []

    def node(turn: int) -> None:
        with run_limits(settings, ledger, turn, spent_before=2) as limits:
            asked.append((turn, limits.reserve()))
        if turn == 1:
            first_done.set()

    second = threading.Thread(target=contextvars.copy_context().run, args=(node, 1))
    second.start()
    first_done.wait(10)
    node(0)
    assert asked == [(1, False), (0, True)] and ledger.calls == 3


def test_with_calls_enough_for_all_a_later_turn_is_not_held_back():
    ledger = RunLedger(calls=1)
    with run_limits(Context(max_llm_calls=3), ledger, turn=1, spent_before=1) as limits:
        assert limits.reserve()  # two were left for two nodes: one each
        assert limits.reserve()  # a retry shares what is left (only first calls go in turn)
        assert limits.reserve() is False
    assert ledger.calls == 3
