"""A thread's state cannot raise its run's bounds (issue 23): a client that writes `llm_calls=-100000`,
`retrieval_rounds=-40` and `generations=-40` into a thread and resumes it with `input=None` gets a run bounded by
the operator's caps, counted in the run's ledger (selfcrag/ledger.py), and every count it sees is the run's own.

In process, with a SQLite checkpointer and the real `ChatOpenAI` client against the local OpenAI-compatible server
(each request is a model call the server counts); the same door on a real `langgraph dev` server is in
test_server_bounds.py. The model never supports the answer, so the graph would regenerate for as long as its
counters let it."""

from __future__ import annotations

import sqlite3

import pytest
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite import SqliteSaver
from support.forged import CAP, FORGED, QUESTION, RESTART
from support.openai_server import OpenAIServer
from support.replies import never_satisfied
from support.shelf import Shelf

from selfcrag import build_graph
from selfcrag.backend import model_components
from selfcrag.contract import Passage
from selfcrag.store import runs


class NewEveryRound:
    """The shelf's passages under new ids each round: every correction finds new evidence to grade."""

    def __init__(self) -> None:
        self.rounds = 0

    def retrieve(self, query: str, settings: object) -> list[Passage]:
        self.rounds += 1
        return [Passage(**{**p, "id": f"{p['doc_id']}#{self.rounds}"}) for p in Shelf().retrieve(query, settings)]


@pytest.fixture
def served(tmp_path):  # noqa: ANN001, ANN201
    with OpenAIServer(never_satisfied()) as server, sqlite3.connect(
            tmp_path / "threads.sqlite", check_same_thread=False) as connection:  # fmt: skip
        llm = ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0)
        graph = build_graph(model_components(llm, retriever=NewEveryRound()), settings={"cap_llm_calls": CAP},
                            checkpointer=SqliteSaver(connection))  # fmt: skip
        yield graph, server


def calls_during(server: OpenAIServer, work):  # noqa: ANN001, ANN201
    before = len(server.requests)
    result = work()
    return result, len(server.requests) - before


@pytest.mark.parametrize("as_node", ["prepare", "contextualize"])  # nodes whose next step is fixed
def test_a_forged_thread_resumed_with_no_input_stays_within_the_caps(served, as_node):
    graph, server = served
    thread = {"configurable": {"thread_id": f"forged-{as_node}"}}
    first, made = calls_during(server, lambda: graph.invoke({"question": QUESTION}, thread))
    assert 0 < first["llm_calls"] == made <= CAP  # the honest run, for comparison
    graph.update_state(thread, {**FORGED, **RESTART}, as_node=as_node)
    resumed, made = calls_during(server, lambda: graph.invoke(None, thread))
    assert 0 < made <= CAP  # without the ledger: every node saw -100000 calls spent, and generated 42 times
    assert resumed["llm_calls"] == made and resumed["tokens"] >= 0  # the run's own counts, never the forged ones
    steps = [step["node"] for step in resumed["trace"]]
    assert steps.count("retrieve") <= 3 and steps.count("generate") <= 2 * 3  # rounds, generations per round
    recorded = [row for row in runs.recent(0) if row["thread_id"] == f"forged-{as_node}"]  # the monitor's rows
    assert recorded and all(0 <= row["llm_calls"] <= CAP for row in recorded)


def test_a_new_run_on_a_forged_thread_starts_clean(served):
    graph, server = served
    thread = {"configurable": {"thread_id": "forged-then-asked"}}
    graph.invoke({"question": QUESTION}, thread)
    graph.update_state(thread, FORGED, as_node="contextualize")
    result, made = calls_during(server, lambda: graph.invoke({"question": QUESTION}, thread))
    assert result["llm_calls"] == made <= CAP
