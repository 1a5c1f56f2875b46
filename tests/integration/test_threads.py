"""Conversations that persist: `selfcrag ask --thread`, `selfcrag chat` and `ask(thread_id=...)` continue a thread
from another process, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from selfcrag import ask, build_graph
from selfcrag.threads import config, persistent

CLI = [sys.executable, "-m", "selfcrag.cli"]
RETURNS = "How many days do I have to return an item?"
REFUNDS = "How long does a refund take to reach my account?"


def cli(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, input=stdin,
                          env={**os.environ, **(env or {})})  # fmt: skip


def history(thread: str) -> list[tuple[str, str]]:
    """The thread as the store holds it: (type, text) per message."""
    state = persistent().get_state(config(thread))
    return [(m.type, m.content) for m in state.values.get("messages", [])]


def test_a_thread_asked_from_two_processes_continues(store_url):
    first = cli("ask", RETURNS, "--thread", "support-42", "--json")
    assert first.returncode == 0, first.stderr
    second = cli("ask", REFUNDS, "--thread", "support-42", "--json")
    assert second.returncode == 0, second.stderr
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    assert (one["thread_id"], one["turn"]) == ("support-42", 1)
    assert (two["thread_id"], two["turn"]) == ("support-42", 2)
    # The second process saw the first turn: its history holds both questions and both answers.
    assert history("support-42") == [("human", RETURNS), ("ai", one["answer"]), ("human", REFUNDS),
                                     ("ai", two["answer"])]  # fmt: skip
    assert "30 days" in one["answer"]


def test_chat_keeps_one_thread_until_the_input_ends(store_url):
    proc = cli("chat", "--thread", "chat-1", stdin=f"{RETURNS}\n\n{REFUNDS}\n")
    assert proc.returncode == 0, proc.stderr
    assert "thread chat-1" in proc.stderr and "30 days" in proc.stdout
    assert [kind for kind, _ in history("chat-1")] == ["human", "ai", "human", "ai"]


def test_ask_in_python_continues_a_thread_and_starts_new_ones(store_url):
    one = ask(RETURNS, thread_id="py-1")
    two = ask(REFUNDS, thread_id="py-1")
    fresh = ask(RETURNS)
    assert (one["turn"], two["turn"], fresh["turn"]) == (1, 2, 1)
    assert fresh["thread_id"] not in ("py-1", "") and two["thread_id"] == "py-1"
    assert [m.content for m in two["messages"] if m.type == "human"] == [RETURNS, REFUNDS]


def test_without_a_usable_store_a_one_off_question_still_runs_and_a_thread_is_refused(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    env = {"SELFCRAG_DATABASE_URL": f"sqlite:///{blocked}/store.db"}
    proc = cli("ask", RETURNS, env=env)
    assert proc.returncode == 0 and "30 days" in proc.stdout
    assert "this run is not kept" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("ask", RETURNS, "--thread", "t", env=env)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "cannot open" in proc.stderr


def test_a_turn_sent_as_question_keeps_the_users_words_in_the_thread_once():
    graph = build_graph(checkpointer=InMemorySaver())
    thread = config("question-turns")
    graph.invoke({"question": RETURNS}, thread)
    graph.invoke({"messages": [HumanMessage(REFUNDS)]}, thread)  # a chat turn: its message is not added again
    graph.invoke({"question": RETURNS, "messages": [HumanMessage(RETURNS)]}, thread)  # both: once
    messages = graph.get_state(thread).values["messages"]
    assert [(m.type, m.content) for m in messages if m.type == "human"] == [("human", RETURNS), ("human", REFUNDS),
                                                                          ("human", RETURNS)]
    assert [m.type for m in messages] == ["human", "ai"] * 3
