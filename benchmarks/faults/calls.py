"""Model and web calls that misbehave, budgets, and a client's hostile settings: the real ChatOpenAI and
tavily-python clients against local servers that answer badly, slowly, or not at all."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer, Reply, Request
from support.replies import Plausible
from support.shelf import Shelf
from support.tavily_server import TavilyTestServer

from faults.core import BOUNDED, OPERATOR_KEY, QUESTION, SLACK, Outcome, case, cases, described, timed
from selfcrag import build_graph, offline_components
from selfcrag.backend import model_components
from selfcrag.errors import EmptyQuestionError, QuestionError, SettingsError
from selfcrag.web_search import TavilyWebSearch

CLEAR_ERRORS = (SettingsError, QuestionError, EmptyQuestionError)  # the one-line errors that bad input deserves


def crash_of(error: BaseException | None) -> bool:
    return error is not None and not isinstance(error, CLEAR_ERRORS)


def model_graph(server: OpenAIServer, **settings: Any) -> Any:
    llm = ChatOpenAI(model="fault-model", base_url=server.base_url, api_key=OPERATOR_KEY,
                     timeout=BOUNDED["llm_timeout"], max_retries=0)  # fmt: skip
    return build_graph(model_components(llm, retriever=Shelf()), settings={**BOUNDED, **settings})


def on_prompt(marker: str, bad: Callable[[], Reply]) -> Callable[[Request], Reply]:
    """A plausible model, except that prompts containing `marker` get the bad reply."""
    plausible = Plausible().responder()
    return lambda request: bad() if marker in request.system or marker == "*" else plausible(request)


def model_run(outcome: Outcome, responder: Callable[[Request], Reply], budget: int | None = None,
              **settings: Any) -> None:  # fmt: skip
    with OpenAIServer(responder) as server:
        graph = model_graph(server, **settings)
        context = {"max_llm_calls": budget} if budget is not None else {}
        result, error, seconds = timed(lambda: graph.invoke({"question": QUESTION}, context=context))
        time.sleep(0.2)  # a request the run abandoned at its deadline has arrived by now
        received = len(server.requests)
    outcome.seen.append(json.dumps(result, default=str) if result else repr(error))
    outcome.flags |= {
        "crashes": crash_of(error) or result is None,
        "past_deadline": seconds > BOUNDED["run_timeout"] + SLACK,
        "budget_overruns": received > (budget if budget is not None else 20),
        "count_mismatches": result is not None and result.get("llm_calls") != received,
    }
    outcome.note = f"{received} requests, llm_calls {result.get('llm_calls') if result else '-'}; " + described(
        result, error
    )


GRADERS = ("Grade every passage", "statement by statement", "grade whether an answer")
GENERATE = "You answer questions using only the evidence"
BAD_REPLIES: dict[str, Callable[[], Reply]] = {
    "2 KB of nested brackets": lambda: Reply.content("[" * 2048),
    "20 KB of nested braces": lambda: Reply.content('{"a":' * 4000),
    "2 MB of JSON then prose": lambda: Reply.content('{"grades": []}' + " and more" * 230_000),
    "JSON then 20 KB of prose": lambda: Reply.content('{"score": 0.9}' + " x" * 10_000),
    "prose, no JSON": lambda: Reply.content("I think the passage is relevant."),
    "empty reply": lambda: Reply.content(""),
    "NUL and control bytes": lambda: Reply.content("\x00\x01\x02{\x00}"),
    "HTTP 500": lambda: Reply.fail(500),
    "HTTP 401 echoing the key": lambda: Reply.fail(401, f"Incorrect API key provided: {OPERATOR_KEY}"),
    "HTTP 400": lambda: Reply.fail(400),
    "429 with Retry-After 1": lambda: Reply.fail(429, retry_after="1"),
    "429 with Retry-After 3600": lambda: Reply.fail(429, retry_after="3600"),
    "never answers": Reply.never,
    "one byte a second": lambda: Reply.drip(Reply.json({"score": 0.9}), 1.0),
}
_reply_cases = [(name, marker) for name in BAD_REPLIES for marker in (*GRADERS, GENERATE)]
cases(
    "replies",
    [f"{name} -> {marker.split()[0].lower()} {marker.split()[-1]}" for name, marker in _reply_cases],
    lambda outcome, pair: model_run(outcome, on_prompt(pair[1], BAD_REPLIES[pair[0]])),
    _reply_cases,
    fast={
        n
        for n, (name, marker) in enumerate(_reply_cases)
        if marker == GENERATE and name in ("2 KB of nested brackets", "HTTP 401 echoing the key", "HTTP 500")
    },
)


@case("replies", "every call never answers")
def _never(outcome: Outcome) -> None:
    model_run(outcome, on_prompt("*", Reply.never))


BUDGETS = [0, 1, 2, 3, 4, 5, 7, 8, 13, 20]
cases("budget", [f"max_llm_calls={b}" for b in BUDGETS],
      lambda outcome, budget: model_run(outcome, Plausible(usefulness=0.1).responder(), budget=budget,
                                        cap_retrieval_rounds=5), BUDGETS, fast={1, 4})  # fmt: skip


def _every_other_fails(outcome: Outcome, budget: int) -> None:
    flaky = {"n": 0}
    never_useful = Plausible(usefulness=0.1).responder()

    def respond(request: Request) -> Reply:
        flaky["n"] += 1
        return Reply.fail(503) if flaky["n"] % 2 else never_useful(request)

    model_run(outcome, respond, budget=budget)


cases("budget", [f"max_llm_calls={b}, every other call 503" for b in (3, 6, 11)], _every_other_fails, [3, 6, 11])

# --- a client's settings --------------------------------------------------------------------------------------

HOSTILE_SETTINGS: list[dict[str, Any]] = [
    {"base_url": "ATTACKER"},
    {"backend": "model", "base_url": "ATTACKER"},
    {"generator_model": "openai:gpt-4o", "base_url": "ATTACKER"},
    {"grader_model": "openai:x"},
    {"index_dir": "/"},
    {"embeddings": "openai:text-embedding-3-small"},
    {"llm_timeout": 100000},
    {"run_timeout": 100000},
    {"cap_llm_calls": 100000},
    {"allow_per_run": ["base_url"]},
    {"max_retrieval_rounds": 2000},
    {"max_llm_calls": 100000},
    {"k": 100000},
    {"web_results": 1000},
    {"context_tokens": 10**9},
    {"max_llm_calls": "abc"},
    {"k": -1},
    {"domain": "astrology"},
    {"temperature": "hot"},
    {"no_such_setting": 1},
]  # fmt: skip  (a client's `calibration` path: trust.py, in a process of its own)


def _settings(outcome: Outcome, asked: dict[str, Any] | None) -> None:
    """A client's `context` against a graph whose operator configured a model endpoint and key."""
    with OpenAIServer(Plausible().responder()) as operator, OpenAIServer(Plausible().responder()) as attacker:
        os.environ.update({"OPENAI_API_KEY": OPERATOR_KEY, "OPENAI_BASE_URL": operator.base_url})
        try:
            graph = build_graph(settings=BOUNDED)
            context = (
                {"k": 4, "max_retrieval_rounds": 2}
                if asked is None
                else {k: attacker.base_url if v == "ATTACKER" else v for k, v in asked.items()}
            )
            result, error, _ = timed(lambda: graph.invoke({"question": QUESTION}, context=context))
        finally:
            for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
                os.environ.pop(name, None)
    outcome.seen.append(json.dumps(result, default=str) if result else str(error))
    outcome.flags["leaked_keys"] = any(OPERATOR_KEY in r.authorization for r in attacker.requests)
    outcome.flags["trespasses"] = bool(attacker.requests)  # the client's endpoint was never called
    # The honest client's run answers; every hostile setting is refused in one line before anything runs.
    outcome.flags["crashes"] = (
        not (result and result.get("answer")) if asked is None else not isinstance(error, SettingsError)
    )
    outcome.note = described(result, error)


cases(
    "settings",
    [json.dumps(s)[:70] for s in HOSTILE_SETTINGS] + ["run settings within the caps"],
    _settings,
    [*HOSTILE_SETTINGS, None],
    fast={0, 9, len(HOSTILE_SETTINGS)},
)

# --- web search ---------------------------------------------------------------------------------------------------

WEB_FAULTS: dict[str, Callable[[TavilyTestServer], None]] = {
    "HTTP 500": lambda s: setattr(s, "fail_status", 500),
    "HTTP 401": lambda s: setattr(s, "fail_status", 401),
    "HTTP 429": lambda s: setattr(s, "fail_status", 429),
    "not JSON": lambda s: setattr(s, "not_json", True),
    "no results": lambda s: None,
    "slower than its deadline": lambda s: setattr(s, "delay", 30.0),
    "never answers": lambda s: setattr(s, "never_answers", True),
}


def _web(outcome: Outcome, name: str) -> None:
    with TavilyTestServer() as server:
        WEB_FAULTS[name](server)
        web = TavilyWebSearch(api_key=server.api_key, api_base_url=server.url)
        graph = build_graph(offline_components(retriever=Shelf(), web=web),
                            settings={"web_timeout": 2.0, "run_timeout": 10.0})  # fmt: skip
        # An off-topic question: nothing kept, so the web is searched.
        result, error, seconds = timed(lambda: graph.invoke({"question": "Which planets have rings?"}))
    outcome.seen.append(json.dumps(result, default=str) if result else str(error))
    outcome.flags |= {"crashes": crash_of(error) or result is None, "past_deadline": seconds > 10.0 + SLACK}
    outcome.note = described(result, error)


cases("web", list(WEB_FAULTS), _web, list(WEB_FAULTS), fast={0})
