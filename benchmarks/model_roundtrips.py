"""Model round trips: selfcrag's model backend against a tutorial-style CRAG/Self-RAG graph, same server.

    .venv/bin/python benchmarks/model_roundtrips.py [--latency 0.3] [--questions 8]

Both graphs call the real `ChatOpenAI` client against the local OpenAI-compatible test server
(tests/support/openai_server.py) with a fixed latency per call, the same retriever (the bundled sample index,
k=5) and the same scripted model (tests/support/replies.py: grades by question-term coverage, answers with the
best document's first sentence). The server counts calls and tokens (tiktoken) and records when each call
started and ended, so the table shows sequential round trips too: calls that overlap in time count once.

The baseline is written here from the description of LangGraph's archived CRAG / Self-RAG examples: one
grading call per document, one after another; the hallucination and answer graders called inside the edge
function after `generate`, one after the other; a rewrite-and-retrieve loop. Its prompts are in the same
style, written for this benchmark. Only bound added: at most two rewrites, since the examples have none.

selfcrag runs as deployed: plain RAG's single-pass draft first (nodes/first_draft.py), both checks at once, and a
correction (grading, refinement, a regeneration or a rewrite) only while the best candidate scores below the floor.
The table gives, per graph, total and median wall time, sequential round trips (total and median per question),
calls, tokens, how many questions showed plain's draft (no correction needed), and the baseline's median time over
the graph's (speed) and the graph's tokens over the baseline's.

Prints a table; writes benchmarks/results/model_roundtrips.json (`--out` elsewhere for trial runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test server and the scripted model live with the tests

from provenance import provenance  # noqa: E402
from support.openai_server import OpenAIServer, Reply, Request  # noqa: E402
from support.replies import Plausible, on_topic  # noqa: E402

from selfcrag import Context, build_graph  # noqa: E402
from selfcrag.backend import model_components  # noqa: E402
from selfcrag.text.text import split_sentences  # noqa: E402

# Answerable sample questions on which the scripted model takes the happy path in both graphs.
QUESTIONS = [
    "How many days do I have to return an item?",
    "How much does express shipping cost?",
    "What does error E1042 mean?",
    "How much is the Plus plan per month?",
    "What is the API rate limit?",
    "After my return is inspected, how long until the money shows up on my card?",
    "On what date am I charged for my monthly subscription?",
    "How many reward points do I need for $5 off?",
]

# --- the tutorial-style baseline ----------------------------------------------------------------------------------

RELEVANCE = ("You are a grader assessing the relevance of a retrieved document to a user question. If the document "
             "contains keywords or meaning related to the question, grade it as relevant. Give a binary score "
             "'yes' or 'no' to say whether the document is relevant to the question.")  # fmt: skip
HALLUCINATION = ("You are a grader assessing whether an LLM generation is grounded in a set of retrieved facts. "
                 "Give a binary score 'yes' or 'no'. 'yes' means the answer is grounded in the set of facts.")
ANSWER = ("You are a grader assessing whether an answer addresses a question. Give a binary score 'yes' or 'no'. "
          "'yes' means the answer resolves the question.")  # fmt: skip
REWRITER = ("You are a question re-writer that converts an input question to a better version that is optimized "
            "for vectorstore retrieval. Look at the input and reason about the underlying semantic intent.")
RAG = ("You are an assistant for question-answering tasks. Use the following pieces of retrieved context to answer "
       "the question. If you don't know the answer, just say that you don't know. Use three sentences maximum and "
       "keep the answer concise.\nQuestion: {question}\nContext: {context}\nAnswer:")  # fmt: skip


class GradeDocuments(BaseModel):
    """Binary score for relevance check on retrieved documents."""

    binary_score: str = Field(description="Documents are relevant to the question, 'yes' or 'no'")


class GradeHallucinations(BaseModel):
    """Binary score for hallucination present in generation answer."""

    binary_score: str = Field(description="Answer is grounded in the facts, 'yes' or 'no'")


class GradeAnswer(BaseModel):
    """Binary score to assess answer addresses question."""

    binary_score: str = Field(description="Answer addresses the question, 'yes' or 'no'")


class BaselineState(TypedDict, total=False):
    question: str
    documents: list[str]
    generation: str
    rewrites: int


def baseline_graph(llm: ChatOpenAI, retriever: Any):  # noqa: ANN201
    settings = Context()
    grader = llm.with_structured_output(GradeDocuments, method="function_calling")
    hallucination_grader = llm.with_structured_output(GradeHallucinations, method="function_calling")
    answer_grader = llm.with_structured_output(GradeAnswer, method="function_calling")

    def retrieve(state: BaselineState) -> dict[str, Any]:
        return {"documents": [p["text"] for p in retriever.retrieve(state["question"], settings)]}

    def grade_documents(state: BaselineState) -> dict[str, Any]:
        kept = []
        for document in state["documents"]:  # one call per document, in turn
            score = grader.invoke([SystemMessage(RELEVANCE), HumanMessage(
                f"Retrieved document: \n\n {document} \n\n User question: {state['question']}")])
            if score.binary_score == "yes":
                kept.append(document)
        return {"documents": kept}

    def generate(state: BaselineState) -> dict[str, Any]:
        context = "\n\n".join(state["documents"])
        reply = llm.invoke([HumanMessage(RAG.format(question=state["question"], context=context))])
        return {"generation": reply.content}

    def transform_query(state: BaselineState) -> dict[str, Any]:
        reply = llm.invoke([SystemMessage(REWRITER), HumanMessage(
            f"Here is the initial question: \n\n {state['question']} \n Formulate an improved question.")])
        return {"question": reply.content, "rewrites": state.get("rewrites", 0) + 1}

    def decide_to_generate(state: BaselineState) -> str:
        if state["documents"] or state.get("rewrites", 0) >= 2:
            return "generate"
        return "transform_query"

    def grade_generation(state: BaselineState) -> str:  # graders inside the edge function, one after the other
        facts = "\n\n".join(state["documents"])
        grounded = hallucination_grader.invoke([SystemMessage(HALLUCINATION), HumanMessage(
            f"Set of facts: \n\n {facts} \n\n LLM generation: {state['generation']}")])
        if grounded.binary_score != "yes":
            return "not supported"
        useful = answer_grader.invoke([SystemMessage(ANSWER), HumanMessage(
            f"User question: \n\n {state['question']} \n\n LLM generation: {state['generation']}")])
        return "useful" if useful.binary_score == "yes" or state.get("rewrites", 0) >= 2 else "not useful"

    graph = StateGraph(BaselineState)
    for node in (retrieve, grade_documents, generate, transform_query):
        graph.add_node(node.__name__, node)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "grade_documents")
    graph.add_conditional_edges("grade_documents", decide_to_generate, ["transform_query", "generate"])
    graph.add_edge("transform_query", "retrieve")
    graph.add_conditional_edges("generate", grade_generation,
                                {"not supported": "generate", "useful": END, "not useful": "transform_query"})
    return graph.compile()


# --- one scripted model for both graphs ------------------------------------------------------------------------------


def responder(model: Plausible):  # noqa: ANN201
    def respond(request: Request) -> Reply:
        system, user = request.system, request.user
        if RELEVANCE in system:
            document, _, question = user.partition("User question: ")
            return Reply.json({"binary_score": "yes" if on_topic(question.strip(), document) else "no"})
        if HALLUCINATION in system or ANSWER in system:
            return Reply.json({"binary_score": "yes"})
        if REWRITER in system:
            return Reply.content(user.split("\n\n", 1)[-1].split("\n")[0].strip() + " (details)")
        if user.startswith("You are an assistant for question-answering tasks"):
            context = user.split("Context: ", 1)[1].rsplit("\nAnswer:", 1)[0]
            first = split_sentences(context)[0] if context.strip() else "I don't know."
            return Reply.content(first)
        return model.responder()(request)  # selfcrag's prompts

    return respond


def round_trips(requests: list[Request]) -> int:
    """Calls on the critical path: a call that starts before the current wave has ended joins it."""
    waves, wave_end = 0, float("-inf")
    for request in sorted(requests, key=lambda r: r.started):
        if request.started >= wave_end:
            waves += 1
            wave_end = request.ended
        else:
            wave_end = max(wave_end, request.ended)
    return waves


def draft_fate(trace: list[dict[str, Any]]) -> str:
    """Which candidate the run showed: plain's draft, a correction's, or none (nothing shown; the baseline)."""
    closing = next((s for s in trace if s.get("node") == "finalize"), {})
    shown = next((c for c in closing.get("candidates") or [] if c.get("shown")), None)
    return "none" if shown is None else "plain" if shown.get("plain") else "corrected"


def run(name: str, graph: Any, questions: list[str], server: OpenAIServer, context: Context | None = None
        ) -> dict[str, Any]:  # fmt: skip
    rows = []
    for question in questions:
        start = len(server.requests)
        tokens_before = server.tokens
        began = time.perf_counter()
        output = graph.invoke({"question": question}, context=context)
        seconds = time.perf_counter() - began
        calls = server.requests[start:]
        rows.append({"question": question, "seconds": round(seconds, 3), "calls": len(calls),
                     "round_trips": round_trips(calls), "tokens": server.tokens - tokens_before,
                     "draft": draft_fate(output.get("trace") or [])})  # fmt: skip
    return {
        "graph": name,
        "wall_seconds": round(sum(r["seconds"] for r in rows), 3),
        "median_seconds": round(statistics.median(r["seconds"] for r in rows), 3),
        "round_trips": sum(r["round_trips"] for r in rows),
        "median_round_trips": statistics.median(r["round_trips"] for r in rows),
        "calls": sum(r["calls"] for r in rows),
        "tokens": sum(r["tokens"] for r in rows),
        "plain_shown": sum(r["draft"] == "plain" for r in rows),
        "candidates": any(r["draft"] != "none" for r in rows),
        "questions": rows,
    }


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--latency", type=float, default=0.3, help="seconds the server waits before each reply")
    cli.add_argument("--questions", type=int, default=len(QUESTIONS))
    cli.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "model_roundtrips.json")
    args = cli.parse_args()
    questions, origin = QUESTIONS[: args.questions], provenance()

    from selfcrag.knowledge.embeddings import default_embedder
    from selfcrag.knowledge.loaded_indexes import index_for

    retriever = index_for(Context(), default_embedder())
    with OpenAIServer(responder(Plausible()), latency=args.latency) as server:
        llm = ChatOpenAI(base_url=server.base_url, api_key="benchmark", model="test-model", max_retries=0)
        ours = build_graph(model_components(llm, retriever=retriever))
        baseline = baseline_graph(llm, retriever)
        for graph in (ours, baseline):  # warm up: embeddings, index, clients
            graph.invoke({"question": questions[0]})
        # Interleaved per question would be fairer to a drifting machine; whole runs keep each graph's rows simple.
        results = [run("selfcrag", ours, questions, server), run("tutorial baseline", baseline, questions, server)]

    base = results[-1]
    keys = ("wall_seconds", "median_seconds", "round_trips", "calls", "tokens")
    # How many times the baseline's time, round trips and calls each graph needs: > 1 is faster or fewer; for
    # tokens the share of the baseline's each graph spends (the target is <= 1.1).
    for r in results:
        r["vs_baseline"] = {k: round(base[k] / r[k], 2) for k in keys if k != "tokens"}
        r["vs_baseline"]["token_share"] = round(r["tokens"] / base["tokens"], 2)
    print(f"{len(questions)} questions, {args.latency * 1000:.0f} ms per model call; x = baseline / graph, "
          "tokens = graph / baseline\n")
    print(f"{'graph':<26}{'wall s':>8}{'median s':>10}{'trips':>7}{'median':>8}{'calls':>7}{'tokens':>8}"
          f"{'plain shown':>13}{'speed':>8}{'tokens':>8}")  # fmt: skip
    for r in results:
        kept = f"{r['plain_shown']}/{len(r['questions'])}" if r["candidates"] else "-"
        print(f"{r['graph']:<26}{r['wall_seconds']:>8.2f}{r['median_seconds']:>10.2f}{r['round_trips']:>7}"
              f"{r['median_round_trips']:>8g}{r['calls']:>7}{r['tokens']:>8}{kept:>13}"
              f"{r['vs_baseline']['median_seconds']:>7.2f}x{r['vs_baseline']['token_share']:>7.2f}x")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**origin, "latency_seconds": args.latency, "results": results}, indent=2) + "\n",
                        encoding="utf-8")  # fmt: skip
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
