"""Hostile text through the whole offline graph, the real CLI in a subprocess, and the model backend against the
local OpenAI-compatible server: escape codes do not change an answer, a question the evidence cannot read
abstains without a model call, bad input fails with one line, and a model fault's text never reaches the user."""

from __future__ import annotations

import subprocess
import sys

import pytest
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer, Reply, Request
from support.replies import Plausible

from selfcrag import Context, build_graph
from selfcrag.backend import model_components
from selfcrag.contract import Passage
from selfcrag.errors import EmptyQuestionError, QuestionError, SettingsError

RETURNS = "How many days do I have to return an item?"
GENERATE = "You answer questions using only the evidence"


@pytest.fixture(scope="module")
def graph():
    return build_graph()


@pytest.fixture(scope="module")
def plain(graph):
    return graph.invoke({"question": RETURNS})


@pytest.mark.parametrize(
    "dressed",
    [f"\x1b[31m{RETURNS}\x1b[0m", f"\x1b[1;4m{RETURNS}\x1b]0;x\x07", "How\u200b many days do I have to "
     "return\u202e an item?\u2069", "  How many\tdays do I\r\nhave to return an item?\x00\ud800\ufffd"],
    ids=["ansi", "osc", "invisible", "controls"],
)
def test_escape_codes_and_invisible_characters_do_not_change_the_answer(graph, plain, dressed):
    result = graph.invoke({"question": dressed})
    assert plain["decision"] == "answer" and "30 days" in plain["answer"]
    assert result["answer"] == plain["answer"] and result["decision"] == "answer"
    assert "31m" not in result["trace"][0]["question"] and result["trace"][0]["question"].startswith("How")


@pytest.mark.parametrize(
    ("question", "missing"),
    [
        ("😀😀😀", "the question has no letters or digits to look up"),
        ("?!? ... ¿¡", "the question has no letters or digits to look up"),
        ("ما هي مدة إرجاع المنتج؟", "the question's script (Arabic) is not covered"),
        ("Как долго идёт возврат денег?", "the question's script (Cyrillic) is not covered"),
        ("पैसे वापस कब मिलेंगे?", "the question's script (Devanagari) is not covered"),
    ],
    ids=["emoji", "punctuation", "arabic", "cyrillic", "devanagari"],
)
def test_a_question_the_evidence_cannot_read_abstains_in_english_without_grading(graph, question, missing):
    result = graph.invoke({"question": question})
    assert result["decision"] == "abstain" and result["citations"] == []
    assert result["answer"].startswith("I don't know") and missing in result["answer"]
    assert result["missing"].startswith(missing)
    steps = [s["node"] for s in result["trace"]]
    assert steps == ["prepare", "contextualize", "route_question", "retrieve", "finalize"]
    assert result["llm_calls"] == 0 and result["clarifying_question"] == ""


def test_chinese_and_mixed_questions_are_still_answered(graph):
    chinese = graph.invoke({"question": "退货期限是多久？"})
    assert chinese["decision"] in ("answer", "answer_with_caveat") and "30" in chinese["answer"]
    mixed = graph.invoke({"question": "Plus 会员的年费是多少？"})
    assert "first_draft" in [s["node"] for s in mixed["trace"]]  # read and drafted from, not refused


@pytest.mark.parametrize(
    ("given", "error", "says"),
    [
        ({"question": 5}, QuestionError, "`question` must be a string, got int"),
        ({"question": ["a"]}, QuestionError, "`question` must be a string, got list"),
        ({"question": None}, EmptyQuestionError, "the question is empty"),
        ({"question": "x" * 10_000_000}, QuestionError, "the question has 10,000,000 characters; at most 4,000"),
        ({"question": "\x1b[0m\u200b\x00"}, EmptyQuestionError, "the question has no visible text"),
        ({"messages": [{"role": "user", "content": "y" * 5000}]}, QuestionError, "the question has 5,000"),
    ],
    ids=["int", "list", "none", "10MB", "invisible", "long-message"],
)
def test_unusable_input_fails_with_one_line(graph, given, error, says):
    with pytest.raises(error) as raised:
        graph.invoke(given)
    assert str(raised.value).startswith(says) and "\n" not in str(raised.value)


def test_the_question_cap_is_an_operator_setting():
    with pytest.raises(QuestionError, match="at most 20 are accepted"):
        build_graph(settings={"max_question_chars": 20}).invoke({"question": RETURNS})
    with pytest.raises(SettingsError, match="max_question_chars is an operator setting"):
        build_graph().invoke({"question": RETURNS}, context={"max_question_chars": 100000})


def test_a_question_from_messages_is_cleaned_too(graph, plain):
    result = graph.invoke({"messages": [{"role": "user", "content": f"\x1b[32m{RETURNS}\x1b[0m"}]})
    assert result["answer"] == plain["answer"]


def cli(*args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "selfcrag.cli", *args], capture_output=True, timeout=180)


def test_cli_reads_argv_that_is_not_utf8():
    proc = cli("ask", b"How many days do I have to return an item?\xff\xfe\xc3(")
    assert proc.returncode == 0, proc.stderr
    assert b"30 days" in proc.stdout and b"Traceback" not in proc.stderr


def test_cli_argv_of_undecodable_bytes_only_is_one_line_of_error():
    proc = cli("ask", b"\xff\xfe\xfd\x1b[31m")
    assert proc.returncode == 1 and proc.stdout == b""
    assert proc.stderr.decode() == "selfcrag: error: the question has no visible text (only control codes, " \
        "invisible characters or bytes that are not UTF-8)\n"


def test_cli_arabic_question_abstains():
    proc = cli("ask", "ما هي مدة إرجاع المنتج؟".encode(), "--json")
    assert proc.returncode == 0, proc.stderr
    assert b'"decision": "abstain"' in proc.stdout and b"(Arabic)" in proc.stdout


SECRET = "invalid api key sk-test-7f3a"


def test_a_model_fault_never_reaches_the_answer():
    model = Plausible()

    def respond(request: Request) -> Reply:
        if GENERATE in request.system:
            return Reply.fail(401, SECRET)
        return model.responder()(request)

    shelf = [Passage(id="returns#0", doc_id="returns", chunk_index=0, title="Returns", source="returns.md",
                     text="Most items can be returned within 30 days of delivery.", score=0.8, origin="kb")]  # type: ignore[typeddict-item]

    class Shelf:
        def retrieve(self, query, settings):  # noqa: ANN001, ANN201
            return list(shelf)

    with OpenAIServer(respond) as server:
        llm = ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0, timeout=10)
        result = build_graph(model_components(llm, retriever=Shelf())).invoke(
            {"question": RETURNS}, context=Context(max_retrieval_rounds=1))  # fmt: skip
    assert any("401" in (s.get("error") or "") for s in result["trace"])  # the fault is in the trace ...
    shown = " ".join([result["answer"], result["missing"], result["messages"][-1].content])
    for leak in ("sk-test", "401", "AuthenticationError", "generator failed", "api key"):
        assert leak not in shown, leak  # ... and nowhere the user reads
    assert result["decision"] == "abstain" and result["answer"].startswith("I don't know")
