"""Progress events (stream_mode="custom"), the generator's tokens (stream_mode="messages"), and
`selfcrag ask --stream`, which shows both live with the time to the first event and the first token."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from support.openai_server import OpenAIServer
from support.replies import Plausible

from selfcrag import build_graph, offline_components
from selfcrag.contract import Draft, GroundednessCheck
from selfcrag.streaming import stream_run

RETURNS = "How many days do I have to return an item?"


def progress(graph: Any, question: str) -> list[dict[str, Any]]:
    return list(graph.stream({"question": question}, stream_mode="custom"))


def test_each_step_reports_progress_as_it_runs():
    events = progress(build_graph(offline_components()), RETURNS)

    texts = {e["node"]: e["text"] for e in events}
    assert texts["retrieve"] == "retrieved 5 passages (round 1/3)"
    assert texts["first_draft"] == "drafting an answer from the 5 retrieved passages, whole"  # plain's single pass
    assert texts["check_hallucination"] == "groundedness 1.00: grounded"
    assert texts["route_question"] == "route: retrieve"
    assert [e["node"] for e in events][:3] == ["route_question", "retrieve", "first_draft"]
    assert "grade_documents" not in texts  # plain's draft scored above the floor: nothing to correct


def test_a_correction_reports_grading_and_generation():
    parts = offline_components()
    graph = build_graph(replace(parts, groundedness=FailsFirstDrafts(parts.groundedness, 1)))
    events = progress(graph, RETURNS)
    texts = {e["node"]: e["text"] for e in events}
    assert texts["grade_documents"].startswith("graded 5 documents: ") and texts["grade_documents"].endswith("correct")
    grades = next(e for e in events if e["node"] == "grade_documents")
    assert sum(grades["counts"].values()) == 5 and set(grades["counts"]) <= {"correct", "ambiguous", "incorrect"}
    assert texts["generate"].startswith("generating an answer from ")


class FailsFirstDrafts:
    """The real groundedness checker, except that it finds the first `failing` drafts' first sentence unsupported:
    plain's draft (so the run corrects), then the correction's first (so it regenerates)."""

    def __init__(self, checker: Any, failing: int = 2) -> None:
        self.checker, self.calls, self.failing = checker, 0, failing

    def check(self, answer: str, strips: list, settings: Any, question: str = "", given: str = "") -> GroundednessCheck:
        self.calls += 1
        if self.calls <= self.failing:
            return GroundednessCheck(score=0.4, grounded=False, unsupported=[answer.split(". ")[0]])
        return self.checker.check(answer, strips, settings, question)


def test_a_regeneration_says_how_many_statements_were_unsupported():
    parts = offline_components()
    graph = build_graph(replace(parts, groundedness=FailsFirstDrafts(parts.groundedness)))
    texts = [e["text"] for e in progress(graph, RETURNS)]
    assert "groundedness 0.40: 1 unsupported statements" in texts
    assert "regenerating: 1 unsupported statements" in texts


class WritingGenerator:
    """A generator that writes through a chat model (a scripted one: it 'writes' the extractive draft), so the
    answer arrives as tokens the way the model backend's does."""

    def __init__(self, extractive: Any) -> None:
        self.extractive = extractive

    def generate(self, question: str, strips: list, settings: Any, avoid: Any = None, history: Any = None) -> Draft:
        draft = self.extractive.generate(question, strips, settings, avoid)
        model = GenericFakeChatModel(messages=iter([AIMessage(content=draft.answer)]))
        written = model.invoke(question)  # streams token by token when stream_mode="messages" listens
        return replace(draft, answer=str(written.content), llm_calls=1)


def test_stream_run_shows_progress_and_tokens_live_with_time_to_first_token():
    parts = offline_components()
    graph = build_graph(replace(parts, generator=WritingGenerator(parts.generator)))
    out = io.StringIO()
    result, timings = stream_run(graph, {"question": RETURNS}, None, out)

    lines = out.getvalue().splitlines()
    (tokens,) = [line for line in lines if line.split("] ", 1)[-1].startswith("first_draft: Most")]
    assert tokens.endswith(result["answer"])  # the whole answer, written token by token onto one line
    assert lines.index(tokens) > next(i for i, line in enumerate(lines) if "drafting an answer" in line)
    assert "check_hallucination: groundedness" in lines[lines.index(tokens) + 1]  # progress resumes below
    assert "30" in result["answer"] and result["decision"] in ("answer", "answer_with_caveat")
    assert timings.first_event is not None and timings.first_token is not None
    assert 0 < timings.first_event < timings.first_token < timings.total
    assert "first token " in timings.summary() and "none" not in timings.summary()


def test_cli_stream_shows_progress_then_the_answer():
    proc = subprocess.run([sys.executable, "-m", "selfcrag.cli", "ask", RETURNS, "--stream"],
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "first_draft: drafting an answer from the 5 retrieved passages" in proc.stderr
    assert proc.stderr.index("retrieve: retrieved") < proc.stderr.index("first_draft: drafting")
    # The offline generator copies sentences: no tokens, and the timing line says so.
    assert "first event " in proc.stderr and "first token none streamed" in proc.stderr
    assert "30 days" in proc.stdout and "Decision:" in proc.stdout
    assert "graded" not in proc.stdout  # progress stays on stderr; stdout is the answer only


def test_cli_stream_json_is_the_same_contract():
    proc = subprocess.run([sys.executable, "-m", "selfcrag.cli", "ask", RETURNS, "--stream", "--json"],
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {"answer", "citations", "decision", "trace"} <= set(out) and "messages" not in out
    assert "first_draft: drafting" in proc.stderr


def test_cli_stream_shows_model_tokens_and_time_to_first_token():
    """The model backend through the real ChatOpenAI client, streaming SSE from a local OpenAI-compatible server."""
    with OpenAIServer(Plausible().responder()) as server:
        proc = subprocess.run([sys.executable, "-m", "selfcrag.cli", "ask", RETURNS, "--model", "openai:local-model",
                               "--stream"], capture_output=True, text=True, timeout=180,
                              env={**os.environ, "OPENAI_BASE_URL": server.base_url})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert all(r.body.get("stream") for r in server.requests)  # a listener on "messages" makes the client stream
    lines = proc.stderr.splitlines()
    # The answer is plain's single-pass draft (first_draft), streamed token by token.
    written = " ".join(line for line in lines if re.match(r"\[\s*[\d.]+s\] first_draft: (?!drafting)", line))
    assert "30 days" in written and "30 days" in proc.stdout
    timing = re.search(r"first event ([\d.]+)s · first token ([\d.]+)s · total ([\d.]+)s", proc.stderr)
    assert timing, proc.stderr
    first_event, first_token, total = map(float, timing.groups())
    assert first_event <= first_token <= total


def test_the_messages_stream_carries_model_output_only_while_the_thread_keeps_the_question():
    parts = offline_components()
    graph = build_graph(replace(parts, generator=WritingGenerator(parts.generator)))
    streamed, values = [], {}
    for mode, chunk in graph.stream({"question": RETURNS}, stream_mode=["messages", "values"]):
        if mode == "messages":
            streamed.append((chunk[0].type, chunk[1]["langgraph_node"]))
        else:
            values = chunk
    assert streamed and {kind for kind, _ in streamed} <= {"AIMessageChunk", "ai"}, streamed  # no echo of RETURNS
    assert {node for _, node in streamed} == {"first_draft", "finalize"}  # the tokens, then the answer as one message
    assert [(m.type, m.content) for m in values["messages"]][0] == ("human", RETURNS)  # who asked what
    assert [m.type for m in values["messages"]] == ["human", "ai"]
