"""Model and web calls stay bounded whatever the server does: the real `ChatOpenAI` client against the local
OpenAI-compatible server scripted to misbehave (tests/support/openai_server.py), the real `tavily-python` client
against the local Tavily stand-in, through the compiled graph. Time bounds are asserted only where the bound is
the feature (a deadline), with generous slack."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer, Reply, Request
from support.replies import Plausible, best_sentence_answer, reworded_answer
from support.shelf import SHELF, Shelf
from support.tavily_server import TavilyTestServer

from selfcrag import build_graph, offline_components
from selfcrag.backend import model_components
from selfcrag.llm.calls import MAX_TOKENS
from selfcrag.text.text import split_sentences
from selfcrag.web_search import TavilyWebSearch

QUESTION = "How many days do I have to return an item?"
GENERATE = "You answer questions using only the evidence"
GRADES, CHECK, ANSWER_GRADE = "Grade every passage", "statement by statement", "grade whether an answer"
ROUTE = "You route a user's message"


@contextmanager
def served(responder, client_timeout: float = 10) -> Iterator[tuple[OpenAIServer, ChatOpenAI]]:  # noqa: ANN001
    with OpenAIServer(responder) as server:
        yield server, ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0,
                                 timeout=client_timeout)  # fmt: skip


def run(llm: ChatOpenAI, question: str = QUESTION, **settings: object) -> dict:
    """One run under these settings, as the operator's (deadlines are operator settings: a run may not choose).
    No test here reads a clock: the errors each step records name the deadline or cap that ended it."""
    graph = build_graph(model_components(llm, retriever=Shelf()), settings=settings)
    return graph.invoke({"question": question})


def errors(result: dict) -> list[str]:
    return [s["error"] for s in result["trace"] if s.get("error")]


def error_of(result: dict, node: str) -> str:
    return next(s["error"] for s in result["trace"] if s["node"] == node and s.get("error"))


def generate_reason(result: dict) -> str:
    return next(s for s in result["trace"] if s["node"] == "generate")["reason"]


def grader(reply: Reply, model: Plausible | None = None):  # noqa: ANN201
    """Graders get `reply`; the generator answers plausibly."""
    plausible = (model or Plausible()).responder()
    return lambda request: plausible(request) if GENERATE in request.system else reply


# --- replies that used to crash or hang the parser ----------------------------------------------------------------


def test_a_nested_bracket_reply_ends_the_run_normally():
    with served(grader(Reply.content("[" * 2048), Plausible(answer=reworded_answer))) as (server, llm):
        result = run(llm, max_retrieval_rounds=1)
    assert result["decision"] == "abstain"  # relevance failed open, groundedness closed: nothing shown unchecked
    assert "malformed reply" in error_of(result, "grade_documents")
    assert "malformed reply" in error_of(result, "check_hallucination")
    assert result["llm_calls"] == len(server.requests)


def test_a_2mb_json_then_text_reply_is_refused_before_parsing():
    def reply_for(request: Request) -> Reply:
        said = Plausible(answer=reworded_answer)(request.system, request.user)
        if isinstance(said, str):
            return Reply.content(said)
        return Reply.content(json.dumps(said) + " Let me explain my reasoning." * 70_000)  # ~2 MB

    with served(reply_for) as (server, llm):
        result = run(llm, max_retrieval_rounds=1)
    assert server.requests[0].status == 200
    assert "characters, more than the" in error_of(result, "grade_documents")
    assert result["decision"] == "abstain" and result["llm_calls"] == len(server.requests)


# --- deadlines ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["silent", "drip"])
def test_a_silent_or_dripping_server_ends_each_call_at_its_deadline_and_the_run_within_run_timeout(fault):
    plausible = Plausible().responder()

    def respond(request: Request) -> Reply:
        return Reply.never() if fault == "silent" else Reply.drip(plausible(request), seconds=1.0)

    # run_timeout 3 s: a run whose corrections find nothing new ends after its first few steps, so the deadline
    # must fall within them for the later steps to meet it.
    llm_timeout, run_timeout = 1.5, 3.0
    with served(respond) as (server, llm):  # the client's own timeout (10 s a read) never fires on a drip
        result = run(llm, llm_timeout=llm_timeout, run_timeout=run_timeout)
    # Each call gave up at its own deadline (the client alone would wait 10 s a read), and once the run's deadline
    # was spent no further call was made: the errors say which deadline ended what, with no clock read by the test.
    assert len(server.requests) >= 2
    assert any("TotalTimeoutError: no complete reply within 1.5 s (llm_timeout)" in e for e in errors(result))
    assert any("run_timeout=3 s) is spent: call not made" in e for e in errors(result))  # later steps: no call
    assert result["llm_calls"] == len(server.requests)
    assert result["decision"] == "abstain"


def test_a_tavily_server_that_never_answers_ends_the_web_step_at_its_deadline():
    with TavilyTestServer([]) as tavily:
        tavily.never_answers = True
        web = TavilyWebSearch(api_key=tavily.api_key, api_base_url=tavily.url)
        graph = build_graph(offline_components(web=web), settings={"web_timeout": 1.0})
        for update in graph.stream({"question": "Do you ship to Antarctica?"}, stream_mode="updates"):
            if "web_search" in update:
                (step,) = update["web_search"]["trace"]
        assert len(tavily.received) == web.searches == 1  # one search a run, and no retry of a timed-out one
    assert step["decision"] == "unavailable"
    # The step's 1 s deadline ended the search (the client alone waits up to 60 s a read): either our wait gave up
    # (TotalTimeoutError, "within 1 s") or, in the same instant on a loaded machine, the client's own read timeout,
    # which the step sets to the time left; both are a TimeoutError at the deadline.
    assert "TimeoutError" in step["reason"]


# --- retries and counts --------------------------------------------------------------------------------------------


def test_llm_calls_equal_the_requests_the_server_received_with_retries():
    plausible = Plausible().responder()
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def respond(request: Request) -> Reply:
        kind = next(mark for mark in (ROUTE, GRADES, GENERATE, CHECK, ANSWER_GRADE) if mark in request.system)
        with lock:
            seen[kind] = seen.get(kind, 0) + 1
            n = seen[kind]
        if n == 1:
            return Reply.fail(503, "overloaded", retry_after="0")
        if n == 2:
            return Reply.fail(429, "slow down", retry_after="0")
        return plausible(request)

    with served(respond) as (server, llm):
        result = run(llm)
    assert [r.status for r in server.asking(GENERATE)] == [503, 429, 200]
    # route, plain's draft and its two checks (above the floor: no grading), three attempts each
    assert len(server.requests) == 12
    assert result["llm_calls"] == len(server.requests)
    assert result["tokens"] == server.tokens > 0
    assert result["decision"] == "answer" and not errors(result)


def test_a_429_with_retry_after_1_is_waited_for():
    plausible = Plausible().responder()
    first = threading.Event()

    def respond(request: Request) -> Reply:
        if GENERATE in request.system and not first.is_set():
            first.set()
            return Reply.fail(429, "rate limited", retry_after="1")
        return plausible(request)

    with served(respond) as (server, llm):
        result = run(llm)
    refused, answered = server.asking(GENERATE)
    assert (refused.status, answered.status) == (429, 200)
    assert answered.started - refused.ended >= 0.9  # the wait the server asked for is the feature
    assert result["decision"] == "answer" and result["llm_calls"] == len(server.requests)


def test_a_429_asking_to_wait_beyond_the_deadline_gives_up_at_once():
    plausible = Plausible().responder()

    def respond(request: Request) -> Reply:
        return Reply.fail(429, "rate limited", retry_after="30") if GENERATE in request.system else plausible(request)

    with served(respond) as (server, llm):
        result = run(llm, llm_timeout=3, max_retrieval_rounds=1)
    # Not retried: 30 s do not fit in 3. Two calls: plain's draft, then the correction's after it.
    assert [r.status for r in server.asking(GENERATE)] == [429, 429]
    assert "beyond the call's deadline" in error_of(result, "generate")
    assert generate_reason(result).endswith("; the model could not be reached")
    assert "429" not in result["answer"] + result["missing"]


@pytest.mark.parametrize("budget", [0, 3, 6, 21])  # each runs out inside a step (the route's call counted)
def test_max_llm_calls_is_never_exceeded(budget):
    # Never grounded and never useful: the run would regenerate and rewrite for as long as it may.
    model = Plausible(unsupported={"30 days"}, usefulness=0.2, answer=reworded_answer)
    with served(model.responder()) as (server, llm):
        result = run(llm, max_llm_calls=budget, max_retrieval_rounds=50, max_generations=50,
                        cap_retrieval_rounds=50, cap_generations=50)
    assert len(server.requests) == budget  # used to reach 4, 4, 7 and 23 (at 0, 3, 5, 20, before the route)
    assert result["llm_calls"] == budget
    if budget:
        assert any("model-call budget (max_llm_calls=" in e for e in errors(result))


def test_the_two_concurrent_checks_share_the_last_call_of_the_budget():
    with served(Plausible().responder()) as (server, llm):
        result = run(llm, max_llm_calls=3)  # route, plain's draft: one call left for two checks
    assert len(server.requests) == 3 and result["llm_calls"] == 3
    assert len(server.asking(CHECK)) + len(server.asking(ANSWER_GRADE)) == 1


# --- sizes, keys, what users read ---------------------------------------------------------------------------------


def test_every_call_carries_max_tokens_for_its_role():
    drafts: list[str] = []

    def declines_first(question: str, evidence: list[tuple[str, str]]) -> str:  # plain's draft finds nothing: grading
        drafts.append(question)
        return "INSUFFICIENT: scripted" if len(drafts) == 1 else best_sentence_answer(question, evidence)

    with served(Plausible(answer=declines_first).responder()) as (server, llm):
        run(llm)
    caps = {name: {r.body.get("max_completion_tokens") for r in server.asking(text)}
            for name, text in [("route", ROUTE), ("grade", GRADES), ("generate", GENERATE), ("check", CHECK),
                               ("answer", ANSWER_GRADE)]}  # fmt: skip
    # A question about one point gets the short answer's cap: a rambling small model stops early.
    assert caps == {"route": {MAX_TOKENS["route"]}, "grade": {MAX_TOKENS["relevance"] * len(SHELF)},
                    "generate": {MAX_TOKENS["short_answer"]}, "check": {MAX_TOKENS["groundedness"]},
                    "answer": {MAX_TOKENS["answer_grade"]}}  # fmt: skip
    assert MAX_TOKENS["short_answer"] < MAX_TOKENS["answer"]
    with served(Plausible().responder()) as (server, llm):
        run(llm, question="Summarise the shipping policy.")  # an overview may run longer
    assert {r.body.get("max_completion_tokens") for r in server.asking(GENERATE)} == {MAX_TOKENS["answer"]}


def test_the_checks_schema_bounds_its_statement_list_by_the_answers_sentences():
    from selfcrag.llm.groundedness import STATEMENTS_PER_SENTENCE

    with served(Plausible().responder()) as (server, llm):
        result = run(llm)
    body = server.asking(CHECK)[0].body
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema") or json.dumps(body)
    answer = next(s for s in result["trace"] if s["node"] == "finalize")["draft"] or result["answer"]
    sentences = max(1, len(split_sentences(answer)))
    # A grammar-constrained server stops the list (and each string) there instead of at the token cap.
    assert f'"maxItems": {STATEMENTS_PER_SENTENCE * sentences}' in json.dumps(schema)
    assert '"maxLength": 300' in json.dumps(schema)


def test_the_operator_key_goes_only_to_the_configured_endpoint(monkeypatch):
    responder = Plausible().responder()
    with OpenAIServer(responder) as operator, OpenAIServer(responder) as other:
        monkeypatch.setenv("OPENAI_BASE_URL", operator.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
        components = model_components(retriever=Shelf())  # models built from the settings, per endpoint

        def ask_at(base_url: str) -> None:
            settings = {"backend": "model", "generator_model": "openai:test-model", "max_retrieval_rounds": 1}
            build_graph(components, settings={**settings, "base_url": base_url}).invoke({"question": QUESTION})

        ask_at("")
        ask_at(other.base_url)
        monkeypatch.setenv("SELFCRAG_API_KEY", "sk-for-other-servers")
        ask_at(other.base_url + "/")
        ask_at(operator.base_url + "/")
    assert {r.authorization for r in operator.requests} == {"Bearer sk-operator"}
    keys = [r.authorization for r in other.requests]
    assert keys and set(keys) <= {"Bearer not-needed", "Bearer sk-for-other-servers"}
    assert keys[0] == "Bearer not-needed" and keys[-1] == "Bearer sk-for-other-servers"


def test_a_failed_generator_is_a_plain_phrase_in_the_question_language():
    plausible = Plausible(relevant=lambda question, text: True).responder()

    def respond(request: Request) -> Reply:
        return Reply.fail(401, "invalid api key sk-abc") if GENERATE in request.system else plausible(request)

    with served(respond) as (_, llm):
        result = run(llm, question="退货期限是多少天？", max_retrieval_rounds=1)
    assert generate_reason(result).endswith("; 无法连接到模型")  # the generator's note, in the question's language
    assert "401" not in result["answer"] + result["missing"] and "Error" not in result["answer"] + result["missing"]
    assert "AuthenticationError" in error_of(result, "generate")  # the fault is in the trace
