"""The model backend end to end: through the real `ChatOpenAI` client against a local OpenAI-compatible server
(tests/support/openai_server.py), and through an injected in-process `BaseChatModel`. Routes, call counts,
streamed tokens, concurrency, and model faults that degrade instead of crashing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer, Reply, Request
from support.replies import Plausible, best_sentence_answer

import selfcrag
from selfcrag import Context, build_graph
from selfcrag.backend import model_components
from selfcrag.contract import Passage

GRADES, ONE_GRADE = "Grade every passage", "Grade the passage"
CHECK, ANSWER_GRADE = "statement by statement", "grade whether an answer"
REWRITE, WEB_REWRITE = "search queries for a knowledge base", "web search query"
GENERATE = "You answer questions using only the evidence"
ROUTE = "You route a user's message"

QUESTIONS = [json.loads(line) for line in (Path(__file__).parents[1] / "data" / "sample_questions.jsonl")
             .read_text(encoding="utf-8").splitlines() if line.strip()]  # fmt: skip
SAME_QUESTIONS = [q for q in QUESTIONS if q["question"] in {  # also answered offline (test_offline_graph.py)
    "How many days do I have to return an item?", "How much does express shipping cost?"}]  # fmt: skip
# Not "What does error E1042 mean?": the scripted model answers with the best document's first sentence, which for
# the error-code page is its heading, about "Error Codes", not E1042; the constraint check rightly refuses it.


def passage(doc: str, text: str, origin: str = "kb") -> Passage:
    return Passage(id=f"{doc}#0", doc_id=doc, chunk_index=0, title=doc.replace("_", " ").title(), source=f"{doc}.md",
                   text=text, score=0.8, origin=origin)  # type: ignore[arg-type]


SHELF = [
    passage("returns", "Most items can be returned within 30 days of delivery. Refunds go to the original card."),
    passage("electronics", "Electronics such as headphones have a shorter return window of 15 days."),
    passage("shipping", "Standard shipping takes 3 to 5 business days. Express shipping takes 1 to 2 days."),
]


class Shelf:
    """A retriever over fixed passages that records the queries it was asked."""

    def __init__(self, passages: list[Passage]) -> None:
        self.passages, self.queries = passages, []

    def retrieve(self, query, settings):  # noqa: ANN001, ANN201
        self.queries.append(query)
        return list(self.passages)


class Web:
    """Web search that is available and returns fixed results."""

    available = True

    def __init__(self, results: list[Passage]) -> None:
        self.results, self.queries = results, []

    def search(self, query, settings):  # noqa: ANN001, ANN201
        self.queries.append(query)
        return list(self.results)


class InProcess(BaseChatModel):
    """Any LangChain chat model: text in, text out, no tool calling and no JSON mode of its own."""

    model: Plausible
    calls: list[str] = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN202
        system = next((m.content for m in messages if isinstance(m, SystemMessage)), "")
        user = [m.content for m in messages if isinstance(m, HumanMessage)][-1]
        said = self.model(system, user)
        self.calls.append(system)
        text = said if isinstance(said, str) else json.dumps(said)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])

    @property
    def _llm_type(self) -> str:
        return "in-process"


@contextmanager
def served(responder, **server_options) -> Iterator[tuple[OpenAIServer, ChatOpenAI]]:  # noqa: ANN001
    with OpenAIServer(responder, **server_options) as server:
        yield server, ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0,
                                 timeout=10)  # fmt: skip


def shelf_graph(llm: BaseChatModel, shelf: Shelf | None = None, web: Web | None = None,  # noqa: ANN201
                settings: dict[str, Any] | None = None):  # fmt: skip
    return build_graph(model_components(llm, retriever=shelf or Shelf(SHELF), web=web), settings=settings)


def nodes(result) -> list[str]:  # noqa: ANN001
    return [step["node"] for step in result["trace"]]


def errors(result) -> dict[str, str]:  # noqa: ANN001
    return {step["node"]: step["error"] for step in result["trace"] if step.get("error")}


def scripted_answers(*answers: str):  # noqa: ANN201
    """A generator that says these answers in turn."""
    said = iter(answers)
    return lambda question, evidence: next(said)


def relevant_answer(relevant):  # noqa: ANN001, ANN201
    """A careful generator: the best sentence of the evidence `relevant` accepts, or INSUFFICIENT when none is."""
    return lambda question, evidence: best_sentence_answer(question, [(i, t) for i, t in evidence
                                                                      if relevant(question, t)])


def declines_first():  # noqa: ANN201
    """A generator whose first draft (plain's single pass) finds nothing, then answers by rule: the run grades."""
    asked = []

    def answer(question: str, evidence: list[tuple[str, str]]) -> str:
        asked.append(question)
        return "INSUFFICIENT: scripted first decline" if len(asked) == 1 else best_sentence_answer(question, evidence)

    return answer


# --- the same questions, three ways ------------------------------------------------------------------------------


@pytest.mark.parametrize("way", ["openai-client", "chat-model-object"])
def test_the_same_questions_run_through_the_openai_client_and_an_injected_chat_model(way):
    model = Plausible()
    with served(model.responder()) as (server, client):
        llm = client if way == "openai-client" else InProcess(model=model)
        graph = build_graph(llm=llm)  # the real sample index, as offline
        for q in SAME_QUESTIONS:
            before = len(server.requests) if way == "openai-client" else len(llm.calls)
            result = graph.invoke({"question": q["question"]})
            assert result["decision"] in ("answer", "answer_with_caveat"), q["question"]
            assert result["citations"][0]["doc_id"].endswith(q["doc_id"])
            assert f"[{result['citations'][0]['ref']}]" in result["answer"]
            made = (len(server.requests) if way == "openai-client" else len(llm.calls)) - before
            assert result["llm_calls"] == made == 3  # plain's draft and its two checks: nothing to correct
            assert result["tokens"] > 0
        unanswerable = graph.invoke({"question": "Do you ship to Antarctica?"})
        assert unanswerable["decision"] == "abstain"
        if way == "openai-client":  # usage as the server counted it
            assert sum(r.status == 200 for r in server.requests) == len(server.requests)


def test_tokens_in_the_output_are_the_tokens_the_server_counted():
    with served(Plausible().responder()) as (server, llm):
        result = shelf_graph(llm).invoke({"question": "How many days do I have to return an item?"})
    assert result["llm_calls"] == len(server.requests)
    assert result["tokens"] == server.tokens > 0
    assert {s["prompt"] for s in result["trace"] if s.get("prompt")} == {"route_question/1",
        "generate/3 (qa, local)", "check_hallucination/3", "grade_answer/4"}


# --- routes ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("greeting", ["Hello!", "你好"])
def test_a_greeting_gets_a_direct_reply_from_one_router_call_and_no_retrieval(greeting):
    shelf = Shelf(SHELF)
    with served(Plausible().responder()) as (server, llm):
        result = shelf_graph(llm, shelf).invoke({"question": greeting})
    assert nodes(result) == ["prepare", "contextualize", "route_question", "finalize"]
    assert shelf.queries == [] and len(server.requests) == len(server.asking(ROUTE)) == result["llm_calls"] == 1
    assert result["decision"] == "direct" and result["citations"] == [] and not errors(result)
    assert result["trace"][2]["prompt"] == "route_question/1"
    assert result["messages"][-1].content == result["answer"]  # the reply joins the chat like an answer


def test_a_malformed_or_failed_router_reply_retrieves_and_the_question_is_answered():
    model = Plausible()
    for broken in (Reply.content("Sure, I would route that to the knowledge base."), Reply.fail(500)):

        def respond(request: Request, broken: Reply = broken) -> Reply:
            return broken if ROUTE in request.system else model.responder()(request)

        with served(respond) as (server, llm):
            result = shelf_graph(llm).invoke({"question": "How many days do I have to return an item?"})
        route = result["trace"][2]
        assert route["node"] == "route_question" and route["decision"] == "retrieve"
        assert route["reason"].startswith("router failed") and set(errors(result)) == {"route_question"}
        assert result["decision"] == "answer" and "30 days" in result["answer"]
        assert result["llm_calls"] == len(server.requests)


def test_a_direct_route_for_a_question_naming_what_the_knowledge_base_holds_retrieves_instead():
    model = Plausible()

    def respond(request: Request) -> Reply:  # a model that takes every message for small talk
        return Reply.json({"route": "direct", "reason": "chat"}) if ROUTE in request.system else model.responder()(
            request)

    question = "How many days do I have to return an item?"
    with served(respond) as (server, llm):
        # The sample index, whose vocabulary the guard reads; with web search on, the model is asked.
        answered = build_graph(model_components(llm, web=Web([]))).invoke({"question": question})
        assert len(server.asking(ROUTE)) == 1
        greeted = build_graph(llm=llm).invoke({"question": "Hello!"})
        asked_before = len(server.asking(ROUTE))
        without_web = build_graph(llm=llm).invoke({"question": question})
        assert len(server.asking(ROUTE)) == asked_before  # no web search: only retrieve could come, so no call
    route = answered["trace"][2]
    assert route["decision"] == "retrieve" and "the knowledge base has: days, return, item" in route["reason"]
    assert answered["decision"] == "answer" and "30 days" in answered["answer"]
    assert greeted["decision"] == "direct" and greeted["llm_calls"] == 1
    assert without_web["trace"][2]["reason"].endswith("no model call needed") and without_web["llm_calls"] == 3


def test_the_model_routes_outside_the_knowledge_base_to_the_web_only_when_web_search_is_configured():
    web = Web([passage("web_polar", "Parcelly ships to research stations in Antarctica twice a year.", "web")])
    model = Plausible(relevant=lambda question, text: "Antarctica" in text)

    def respond(request: Request) -> Reply:
        if ROUTE in request.system:
            return Reply.json({"route": "web", "reason": "not about the shop"})  # a synonym, read as web_search
        return model.responder()(request)

    shelf = Shelf(SHELF)
    with served(respond) as (server, llm):
        result = shelf_graph(llm, shelf, web=web).invoke({"question": "Do you ship to Antarctica?"})
        assert "web_search" in server.asking(ROUTE)[0].system  # the route is offered because web search is on
        without_web = shelf_graph(llm, Shelf(SHELF)).invoke({"question": "Do you ship to Antarctica?"})
    assert nodes(result)[:5] == ["prepare", "contextualize", "route_question", "web_search", "generate"]
    assert shelf.queries == [] and result["citations"][0]["doc_id"] == "web_polar"
    assert nodes(without_web)[3] == "retrieve" and "unavailable" in without_web["trace"][2]["reason"]


def test_all_passages_incorrect_with_web_search_replaces_the_evidence_with_web_results():
    web = Web([passage("web_polar", "Parcelly ships to research stations in Antarctica twice a year.", "web")])
    on_topic = lambda question, text: "Antarctica" in text  # noqa: E731
    model = Plausible(relevant=on_topic, answer=relevant_answer(on_topic))
    with served(model.responder()) as (server, llm):
        result = shelf_graph(llm, web=web).invoke({"question": "Do you ship to Antarctica?"})
    # Plain's draft from the shelf's passages finds nothing; grading says incorrect: the web replaces them.
    assert nodes(result) == ["prepare", "contextualize", "route_question", "retrieve", "first_draft",
                             "grade_documents", "rewrite_query", "web_search", "generate", "check_hallucination",
                             "grade_answer", "judge", "finalize"]  # fmt: skip
    assert result["trace"][4]["decision"] == "no answer" and result["trace"][5]["decision"] == "incorrect"
    assert web.queries == ["ship Antarctica"]  # the model's keyword query, not the question
    assert len(server.asking(GRADES)) == 2  # the knowledge-base passages, then the web results: one call each
    assert result["decision"] == "answer" and result["citations"][0]["doc_id"] == "web_polar"


def test_all_passages_incorrect_without_web_search_rewrites_and_retrieves_again_until_rounds_run_out():
    shelf = Shelf(SHELF)
    never = lambda question, text: False  # noqa: E731
    with served(Plausible(relevant=never, answer=relevant_answer(never)).responder()) as (server, llm):
        result = shelf_graph(llm, shelf).invoke({"question": "Do you ship to Antarctica?"},
                                                context=Context(max_retrieval_rounds=2))  # fmt: skip
    # The shelf returns the same passages for any query: round 2 finds nothing new, so nothing is graded twice.
    assert nodes(result) == ["prepare", "contextualize", "route_question", "retrieve", "first_draft",
                             "grade_documents", "rewrite_query", "retrieve", "finalize"]  # fmt: skip
    assert "no new evidence, correction ends" in result["trace"][-2]["reason"]
    assert shelf.queries == ["Do you ship to Antarctica?", "Do you ship to Antarctica? details"]
    assert len(server.asking(REWRITE)) == 1 and len(server.asking(GENERATE)) == 1  # plain's draft only
    assert result["decision"] == "abstain" and result["answer"].startswith("I don't know")


def test_unsupported_statements_get_one_regeneration_that_is_told_what_they_were():
    wrong = "Returns are accepted within 45 days [doc_1]."
    model = Plausible(unsupported={"45 days"}, answer=scripted_answers(
        wrong, wrong, "Most items can be returned within 30 days [doc_1]."))
    with served(model.responder()) as (server, llm):
        result = shelf_graph(llm).invoke({"question": "How many days do I have to return an item?"})
    drafts = server.asking(GENERATE)  # plain's draft, the correction's from the strips, its regeneration
    assert len(drafts) == 3
    assert "do not repeat" not in drafts[0].user and "do not repeat" not in drafts[1].user
    assert "do not repeat them:\n- Returns are accepted within 45 days." in drafts[2].user
    checks = [s for s in result["trace"] if s["node"] == "check_hallucination"]
    assert [c["decision"] for c in checks] == ["not grounded", "not grounded", "grounded"]
    assert "number 45 not in the evidence" in checks[0]["reason"]  # the rule checks agree with the model
    assert result["decision"] == "answer" and "30 days" in result["answer"]


@pytest.mark.parametrize(("mode", "calls"), [("batch", 1), ("parallel", 3)])
def test_k_passages_are_graded_in_one_call_or_in_k_concurrent_calls(mode, calls):
    model = Plausible(answer=declines_first())  # plain's draft finds nothing: the run grades
    together = threading.Barrier(3, timeout=10)  # parallel calls pass only if all three are in flight at once

    def respond(request: Request) -> Reply:
        if ONE_GRADE in request.system:
            together.wait()
        return model.responder()(request)

    with served(respond) as (server, llm):
        result = shelf_graph(llm, settings={"grading": mode}).invoke(
            {"question": "How many days do I have to return an item?"})
    grading = server.asking(GRADES if mode == "batch" else ONE_GRADE)
    assert len(grading) == calls
    assert sum(r.user.count("<passage-") for r in grading) == len(SHELF)
    assert not errors(result)
    (graded,) = [s for s in result["trace"] if s["node"] == "grade_documents"]
    assert [g["label"] for g in graded["grades"]] == ["correct", "correct", "incorrect"]


def test_the_hallucination_check_and_the_answer_grade_run_concurrently():
    model = Plausible()
    both = threading.Barrier(2, timeout=10)  # each check's reply waits for the other's request

    def respond(request: Request) -> Reply:
        if CHECK in request.system or ANSWER_GRADE in request.system:
            both.wait()
        return model.responder()(request)

    with served(respond) as (server, llm):
        result = shelf_graph(llm).invoke({"question": "How many days do I have to return an item?"})
    assert not errors(result)
    assert server.max_in_flight == 2
    assert result["decision"] == "answer"


def test_chat_history_reaches_the_generator():
    with served(Plausible().responder()) as (server, llm):
        shelf_graph(llm).invoke({"messages": [
            {"role": "user", "content": "I bought headphones last week."},
            {"role": "assistant", "content": "Thanks, how can I help?"},
            {"role": "user", "content": "How many days do I have to return them?"}]})  # fmt: skip
    messages = server.asking(GENERATE)[0].body["messages"]
    assert [m["content"] for m in messages[-3:]] == [
        "I bought headphones last week.", "Thanks, how can I help?", messages[-1]["content"]]
    assert messages[-1]["content"].endswith("Question: How many days do I have to return them?")


# --- streaming -------------------------------------------------------------------------------------------------------


def test_generator_tokens_stream_through_stream_mode_messages():
    with served(Plausible().responder()) as (_, llm):
        graph = shelf_graph(llm)
        chunks = list(graph.stream({"question": "How many days do I have to return an item?"}, stream_mode="messages"))
    by_node: dict[str, list[str]] = {}
    for message, metadata in chunks:
        by_node.setdefault(metadata["langgraph_node"], []).append(message.content)
    tokens = [t for t in by_node["first_draft"] if t]  # plain's single-pass draft, shown
    assert len(tokens) > 5  # token by token, not one message at the end
    assert "".join(tokens) == "Most items can be returned within 30 days of delivery [doc_1]."
    assert not {"grade_documents", "check_hallucination", "grade_answer"} & set(by_node)  # graders do not stream


# --- structured output and faults ---------------------------------------------------------------------------------


def test_a_server_without_json_schema_gets_function_calling_and_it_is_remembered():
    with served(Plausible().responder(), methods=("function_calling",)) as (server, llm):
        result = shelf_graph(llm).invoke({"question": "How many days do I have to return an item?"})
    structured = [r.method for r in server.requests if r.method != "text"]
    # the two checks of plain's draft (the first probe rejected, then remembered), and nothing to grade
    assert structured == ["json_schema", "function_calling", "function_calling", "function_calling"]
    assert [r.status for r in server.requests if r.method == "json_schema"] == [400]
    assert result["decision"] == "answer" and not errors(result)
    assert result["llm_calls"] == len(server.requests)  # the rejected probe counts as a call


def test_a_server_with_no_structured_output_at_all_gets_plain_prompts():
    with served(Plausible().responder(), methods=()) as (server, llm):
        result = shelf_graph(llm).invoke({"question": "How many days do I have to return an item?"})
    structured = [r.method for r in server.requests if GENERATE not in r.system]
    assert structured == ["json_schema", "function_calling", "json_mode", "text", "text", "text"]
    assert result["decision"] == "answer" and not errors(result)


def test_json_wrapped_in_prose_and_code_fences_is_parsed_leniently():
    model = Plausible()

    def respond(request: Request) -> Reply:
        said = model(request.system, request.user)
        if isinstance(said, str):
            return Reply.content(said)
        return Reply.content(f"Sure! Here it is:\n```json\n{json.dumps(said, indent=1)[:-1]},}}\n```\nAnything else?")

    with served(respond) as (_, llm):
        result = shelf_graph(llm).invoke({"question": "How many days do I have to return an item?"})
    assert result["decision"] == "answer" and not errors(result)


def test_garbage_from_every_grader_degrades_each_in_its_direction():
    model = Plausible()

    def respond(request: Request) -> Reply:
        if GENERATE in request.system:  # in its own words: a sentence copied from the evidence needs no model check
            return Reply.content("You have about a month to send an item back [doc_1].")
        said = model(request.system, request.user)
        return Reply.content(said if isinstance(said, str) else "I'm sorry, I can't help with that.")

    with served(respond) as (server, llm):
        result = shelf_graph(llm).invoke({"question": "How many days do I have to return an item?"},
                                         context=Context(max_retrieval_rounds=1))  # fmt: skip
    # plain's draft could not be checked (fails closed: never shown), so the run grades and corrects
    (graded,) = [s for s in result["trace"] if s["node"] == "grade_documents"]
    grades = graded["grades"]
    assert {g["label"] for g in grades} == {"ambiguous"}  # relevance fails open: the evidence stays in play
    assert all(g["reason"].startswith("grader failed: malformed reply") for g in grades)
    checks = [s for s in result["trace"] if s["node"] == "check_hallucination"]
    assert [c["decision"] for c in checks] == ["not grounded"] * 3  # plain's, the correction's and its regeneration
    assert "fails closed" in checks[0]["reason"]
    assert {"grade_documents", "check_hallucination", "grade_answer"} <= set(errors(result))
    assert result["decision"] == "abstain"  # an answer nobody could check is never shown
    assert result["llm_calls"] == len(server.requests)


def scoring_calibration(folder: Path) -> str:
    """The shipped fit, as a file that says it scores ungrounded drafts (quality/calibration.py)."""
    from selfcrag.quality.calibration import shipped

    path = folder / "scored.json"
    body = json.loads(shipped("model").read_text(encoding="utf-8"))
    path.write_text(json.dumps({**body, "ungrounded_drafts": "scored"}), encoding="utf-8")
    return str(path)


PARAPHRASE = "You have about a month to send an item back [doc_1]."  # in its own words: the checker must judge it


def test_a_draft_the_checker_doubts_is_withheld_unless_the_calibration_scores_it(tmp_path):
    model = Plausible(answer=lambda question, evidence: PARAPHRASE, unsupported={"about a month"})
    question = {"question": "How many days do I have to return an item?"}
    with served(model.responder()) as (_, llm):
        withheld = shelf_graph(llm).invoke(question, context=Context(max_retrieval_rounds=1))
        scored = shelf_graph(llm, settings={"calibration": scoring_calibration(tmp_path)}).invoke(
            question, context=Context(max_retrieval_rounds=1))  # fmt: skip
    for result, drafts in ((withheld, 3), (scored, 1)):
        checks = [s["decision"] for s in result["trace"] if s["node"] == "check_hallucination"]
        # Withheld: plain's, the correction's and its regeneration, none showable; scored: plain's draft is.
        assert checks == ["not grounded"] * drafts and not errors(result)
    assert withheld["decision"] == "abstain" and PARAPHRASE not in withheld["answer"]
    # Confident by the calibration's reading, but the check doubted it: shown, and never as a plain answer.
    assert scored["decision"] == "answer_with_caveat" and scored["answer"].startswith(PARAPHRASE)
    assert "groundedness" in scored["answer"].split(PARAPHRASE, 1)[1].lower()  # the caveat names the doubt
    assert len(next(s for s in withheld["trace"] if s["node"] == "finalize")["candidates"]) == 3  # every draft kept


def test_a_scoring_calibration_still_never_shows_an_answer_nobody_could_check(tmp_path):
    model = Plausible(answer=lambda question, evidence: PARAPHRASE)

    def respond(request: Request) -> Reply:
        if CHECK in request.system:
            return Reply.content("I'm sorry, I can't help with that.")
        return model.responder()(request)

    with served(respond) as (_, llm):
        result = shelf_graph(llm, settings={"calibration": scoring_calibration(tmp_path)}).invoke(
            {"question": "How many days do I have to return an item?"}, context=Context(max_retrieval_rounds=1))
    assert all("fails closed" in s["reason"] for s in result["trace"] if s["node"] == "check_hallucination")
    assert result["decision"] == "abstain" and "vetoed" in next(
        s for s in result["trace"] if s["node"] == "finalize")["reason"]


def test_a_generator_error_means_no_draft_and_the_run_still_ends():
    model = Plausible()

    def respond(request: Request) -> Reply:
        if GENERATE in request.system:
            return Reply.fail(401, "invalid api key")
        return model.responder()(request)

    with served(respond) as (_, llm):
        result = shelf_graph(llm).invoke({"question": "How many days do I have to return an item?"},
                                         context=Context(max_retrieval_rounds=1))  # fmt: skip
    assert "AuthenticationError" in errors(result)["generate"] and "401" in errors(result)["generate"]
    assert result["decision"] == "abstain"
    # The fault is the trace's business; what the user reads says nothing of it (finalize.degraded), and the
    # generator's own note is a plain phrase.
    assert "401" not in result["missing"] + result["answer"] and "failed" not in result["answer"]
    assert "Error" not in result["missing"] + result["answer"]
    assert next(s for s in result["trace"] if s["node"] == "generate")["reason"].endswith(
        "; the model could not be reached")


def test_a_transient_error_is_retried_by_the_node():
    model = Plausible()
    failures = iter([Reply.fail(503, "overloaded")])

    def respond(request: Request) -> Reply:
        if GENERATE in request.system:
            return next(failures, None) or model.responder()(request)
        return model.responder()(request)

    with served(respond) as (server, llm):
        result = shelf_graph(llm).invoke({"question": "How many days do I have to return an item?"})
    assert [r.status for r in server.asking(GENERATE)] == [503, 200]
    assert result["decision"] == "answer" and not errors(result)


def test_a_call_that_keeps_timing_out_is_retried_then_degrades():
    model = Plausible()
    release = threading.Event()

    def respond(request: Request) -> Reply:
        if ANSWER_GRADE in request.system:
            release.wait(5)  # longer than the client's timeout
        return model.responder()(request)

    with served(respond) as (server, _):
        llm = ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0, timeout=0.3)
        result = shelf_graph(llm).invoke({"question": "How many days do I have to return an item?"})
        release.set()
    # Three attempts for each draft: plain's, then (its relevance unmeasured, below the floor) the correction's.
    assert len(server.asking(ANSWER_GRADE)) == 6
    assert "TimeoutError" in errors(result)["grade_answer"]
    # usefulness fails open (the answer was grounded, so it is shown); its confidence counts the unmeasured relevance
    assert result["decision"] in ("answer", "answer_with_caveat")


def test_the_budget_stops_corrections_and_every_call_is_counted():
    with served(Plausible(usefulness=0.2).responder()) as (server, llm):  # never useful: would rewrite forever
        result = shelf_graph(llm, settings={"cap_retrieval_rounds": 10}).invoke(
            {"question": "How many days do I have to return an item?"},
            context=Context(max_llm_calls=6, max_retrieval_rounds=10))  # fmt: skip
    assert nodes(result).count("retrieve") == 1  # plain's draft, one correction, then the budget was spent
    assert result["llm_calls"] == len(server.requests) == 6  # a hard ceiling: the correction's checks stop at it
    assert result["tokens"] == server.tokens


# --- the default graph, the CLI ------------------------------------------------------------------------------------


def test_the_default_graph_uses_models_when_a_compatible_server_is_configured(monkeypatch):
    question = "How many days do I have to return an item?"
    with served(Plausible().responder()) as (server, _):
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        on_models = selfcrag.ask(question)
        monkeypatch.setenv("SELFCRAG_BACKEND", "offline")  # the operator's choice, not a run's
        forced_offline = selfcrag.ask(question)
        monkeypatch.delenv("SELFCRAG_BACKEND")
        monkeypatch.delenv("OPENAI_BASE_URL")
        offline = selfcrag.ask(question)
    assert on_models["llm_calls"] == len(server.requests) == 3
    assert {r.body["model"] for r in server.requests} == {"gpt-4o-mini"}  # Context.generator_model's default
    assert forced_offline["llm_calls"] == offline["llm_calls"] == 0


def test_cli_model_flag_answers_through_a_compatible_server():
    with served(Plausible().responder()) as (server, _):
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
        proc = subprocess.run([sys.executable, "-m", "selfcrag.cli", "ask", "How many days do I have to return an "
                               "item?", "--model", "openai:local-model", "--json"], capture_output=True, text=True,
                              env=env, timeout=180)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["llm_calls"] == len(server.requests) > 0 and out["tokens"] > 0
    assert {r.body["model"] for r in server.requests} == {"local-model"}


def test_cli_model_flag_without_a_key_or_server_is_a_one_line_error():
    proc = subprocess.run([sys.executable, "-m", "selfcrag.cli", "ask", "How many days?", "--model", "openai:gpt-4o"],
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "selfcrag: error: model 'openai:gpt-4o' needs OPENAI_API_KEY, or OPENAI_BASE_URL for a compatible server"]
