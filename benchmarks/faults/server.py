"""A shared server, as hostile clients meet it: one real `langgraph dev` with the operator's identity file
(SELFCRAG_AUTH_FILE: sha256 hashes of bearer tokens, selfcrag/auth.py), the model at a local OpenAI-compatible
server under the operator's planted key, two askers (alice, bob), a reviewer (carol) and an operator (olga), all
through `langgraph_sdk`. Every answer is held for review (SELFCRAG_HUMAN_REVIEW=1, and each asker asks for a
confidence no answer reaches), so every thread has a draft a client could try to read, forge or publish."""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from langgraph_sdk import get_sync_client
from support.langgraph_server import langgraph_dev
from support.openai_server import OpenAIServer, Reply, Request
from support.replies import Plausible

from faults.core import OPERATOR_KEY, QUESTION, SLACK, Outcome, case

HOLD = {"min_confidence": 1.0, "caveat_band": 0.0}
FORGED = "FORGED-ANSWER: every refund is approved at once, no questions asked."
RUN_TIMEOUT = 20.0
PEOPLE = {"alice": "asker", "bob": "asker", "carol": "reviewer", "olga": "operator"}


class Model:
    """The model every run on the server calls: plausible, or (for the forged-counter cases) never satisfied."""

    def __init__(self) -> None:
        self.never_useful = False
        self.plausible, self.stubborn = Plausible().responder(), Plausible(usefulness=0.1).responder()

    def __call__(self, request: Request) -> Reply:
        return (self.stubborn if self.never_useful else self.plausible)(request)


class Server:
    _running: Server | None = None

    def __init__(self) -> None:
        work = Path(tempfile.mkdtemp(prefix="selfcrag-faults-server-"))
        self.tokens = {name: secrets.token_urlsafe(32) for name in PEOPLE}
        entries = [{"sha256": hashlib.sha256(self.tokens[n].encode()).hexdigest(), "identity": n, "role": role}
                   for n, role in PEOPLE.items()]  # fmt: skip
        (work / "identities.json").write_text(json.dumps({"tokens": entries}))
        self.model = Model()
        self._stack = contextlib.ExitStack()
        self.llm = self._stack.enter_context(OpenAIServer(self.model))
        env = {"SELFCRAG_AUTH_FILE": str(work / "identities.json"), "SELFCRAG_HUMAN_REVIEW": "1",
               "SELFCRAG_HOME": str(work / "home"), "SELFCRAG_RUN_TIMEOUT": str(RUN_TIMEOUT),
               "OPENAI_BASE_URL": self.llm.base_url, "OPENAI_API_KEY": OPERATOR_KEY}  # fmt: skip
        self.url = self._stack.enter_context(langgraph_dev(env))
        self.work, self.started = work, time.time()
        self.assistant = self.client("olga").assistants.search(graph_id="selfcrag")[0]["assistant_id"]

    @classmethod
    def get(cls) -> Server:
        if cls._running is None:
            cls._running = Server()
            atexit.register(cls._running._stack.close)
        return cls._running

    def client(self, name: str | None) -> Any:
        return get_sync_client(url=self.url, api_key=self.tokens[name] if name else "", headers=None)

    def held_thread(self, outcome: Outcome, asker: str = "alice") -> tuple[str, Any]:
        """A thread of `asker` whose answer waits for review, and what the asker got back."""
        client = self.client(asker)
        thread = client.threads.create()["thread_id"]
        result = client.runs.wait(thread, self.assistant, input={"question": QUESTION}, context=HOLD)
        outcome.seen.append(json.dumps(result, default=str))
        return thread, result


def allowed(outcome: Outcome, call: Callable[[], Any]) -> bool:
    """Whether the server did what was asked (a 401/403/404/409/422 refusal is False); what came back is seen."""
    try:
        found = call()
    except httpx.HTTPStatusError as exc:
        outcome.seen.append(exc.response.text)
        return False
    outcome.seen.append(json.dumps(found, default=str))
    return True


def draft_of(server: Server, thread: str) -> str:
    """The held draft as the reviewer reads it: from the review case in the store, or the thread's state."""
    carol = server.client("carol")
    with contextlib.suppress(httpx.HTTPStatusError):
        item = carol.store.get_item(["selfcrag_reviews"], thread)
        if item and item.get("value"):
            return str(item["value"].get("draft_answer") or item["value"].get("draft") or "")
    with contextlib.suppress(httpx.HTTPStatusError):
        values = carol.threads.get_state(thread)["values"]
        return str((values.get("draft") or {}).get("answer") or "")
    return ""


@case("server", "a request without a token", fast=True)
def _no_token(outcome: Outcome) -> None:
    server = Server.get()
    outcome.flags["trespasses"] = allowed(outcome, lambda: server.client(None).threads.search())
    outcome.note = "refused" if not outcome.flags["trespasses"] else "answered without a token"


@case("server", "another asker searches, reads and runs alice's thread", fast=True)
def _other_asker(outcome: Outcome) -> None:
    server = Server.get()
    thread, _ = server.held_thread(outcome)
    bob = server.client("bob")
    listed = thread in json.dumps(bob.threads.search(limit=100))
    reads = allowed(outcome, lambda: bob.threads.get(thread))
    runs = allowed(outcome, lambda: bob.runs.wait(thread, server.assistant, input={"question": "And refunds?"}))
    outcome.flags["trespasses"] = listed or reads or runs
    outcome.note = f"bob: listed {listed}, read {reads}, ran {runs}"


@case("server", "askers approve a held answer (their own, another's)", fast=True)
def _asker_approves(outcome: Outcome) -> None:
    server = Server.get()
    thread, _ = server.held_thread(outcome)
    approve = {"resume": {"action": "approve"}}
    by_bob = allowed(outcome, lambda: server.client("bob").runs.wait(thread, server.assistant, command=approve))
    by_alice = allowed(outcome, lambda: server.client("alice").runs.wait(thread, server.assistant, command=approve))
    outcome.flags["trespasses"] = by_bob or by_alice
    outcome.note = f"approved by bob {by_bob}, by alice {by_alice}"


@case("server", "a reviewer approves with a draft written into the command", fast=True)
def _forged_draft(outcome: Outcome) -> None:
    server = Server.get()
    thread, _ = server.held_thread(outcome)
    command = {"update": {"draft": {"answer": FORGED, "citations": []}}, "resume": {"action": "approve"}}
    carol = server.client("carol")
    if allowed(outcome, lambda: carol.runs.wait(thread, server.assistant, command=command)):
        published = carol.threads.get_state(thread)["values"].get("answer", "")
        outcome.flags["forged_state"] = FORGED in str(published)
        outcome.note = "the command's draft was published" if outcome.flags["forged_state"] else "update ignored"
    else:
        outcome.note = "a command with an update is refused"


@case("server", "the held draft in what the asker can read or stream", fast=True)
def _draft_visible(outcome: Outcome) -> None:
    server = Server.get()
    alice = server.client("alice")
    thread, result = server.held_thread(outcome)
    draft = draft_of(server, thread)
    views: dict[str, Any] = {"run result": result}
    for name, call in {"state": lambda: alice.threads.get_state(thread), "thread": lambda: alice.threads.get(thread),
                       "history": lambda: alice.threads.get_history(thread)}.items():  # fmt: skip
        with contextlib.suppress(httpx.HTTPStatusError):
            views[name] = call()
    for mode in ("values", "updates", "debug", "messages", "events"):
        fresh = alice.threads.create()["thread_id"]
        with contextlib.suppress(Exception):  # a mode this server does not offer is no view
            views[f"stream {mode}"] = [
                part.data
                for part in alice.runs.stream(
                    fresh, server.assistant, input={"question": QUESTION}, context=HOLD, stream_mode=mode
                )
            ]
    text = {name: json.dumps(view, default=str) for name, view in views.items()}
    outcome.seen += list(text.values())
    shown = [name for name, seen in text.items() if draft and draft[:60] in seen]
    outcome.flags["trespasses"] = bool(shown) or not draft
    outcome.note = (
        f"draft seen in {', '.join(shown)}"
        if shown
        else ("no draft found for the reviewer" if not draft else f"draft hidden from {len(text)} views")
    )


@case("server", "an asker changes the shared assistant", fast=True)
def _assistant_update(outcome: Outcome) -> None:
    server = Server.get()
    changed = allowed(
        outcome, lambda: server.client("alice").assistants.update(server.assistant, context={"max_llm_calls": 0})
    )
    if changed:  # put it back for the other cases
        server.client("olga").assistants.update(server.assistant, context={})
    outcome.flags["trespasses"] = changed
    outcome.note = "changed by an asker" if changed else "refused"


def _forge_counters(outcome: Outcome, writer: str) -> None:
    """Counters written into a thread's state (as the asker, then as the operator, who may write state): the run
    that resumes it still stops at its budget and deadline."""
    server = Server.get()
    client = server.client("alice")
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, server.assistant, input={"question": QUESTION})
    forged = {"llm_calls": -100000, "run_started": 4e9, "retrieval_rounds": -40}
    if not allowed(outcome, lambda: server.client(writer).threads.update_state(thread, forged, as_node="prepare")):
        outcome.note = f"{writer} may not write thread state"
        return
    server.model.never_useful = True
    before, started = len(server.llm.requests), time.monotonic()
    try:
        result = server.client(writer).runs.wait(thread, server.assistant, input=None)
    finally:
        server.model.never_useful = False
    seconds, made = time.monotonic() - started, len(server.llm.requests) - before
    outcome.seen.append(json.dumps(result, default=str))
    calls = result.get("llm_calls", 0) if isinstance(result, dict) else 0
    outcome.flags |= {"budget_overruns": made > 20, "past_deadline": seconds > RUN_TIMEOUT + SLACK,
                      "forged_state": calls < 0 or made > 20}  # fmt: skip
    outcome.note = f"{made} model calls after the forged update, llm_calls {calls}, {seconds:.0f}s"


@case("server", "an asker writes the run's counters into its thread", fast=True)
def _asker_forges(outcome: Outcome) -> None:
    _forge_counters(outcome, "alice")


@case("server", "the operator writes the run's counters into a thread", fast=True)
def _operator_forges(outcome: Outcome) -> None:
    _forge_counters(outcome, "olga")


@contextlib.contextmanager
def opened(fifo: Path) -> Iterator[list[bool]]:
    """Whether anyone opened the FIFO for reading while the context lasted: an open for writing without blocking
    succeeds only then (ENXIO otherwise). It is closed at once, so a reader gets an empty file, never a hang."""
    os.mkfifo(fifo)
    seen, stop = [False], threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                seen[0] = True
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        stop.set()
        watcher.join()


@case("server", "a client's calibration path: a FIFO, a file that exists, one that does not", fast=True)
def _calibration(outcome: Outcome) -> None:
    server = Server.get()
    alice = server.client("alice")

    def run_with(path: str) -> str:
        thread = alice.threads.create()["thread_id"]
        try:
            return json.dumps(alice.runs.wait(thread, server.assistant, input={"question": QUESTION},
                                              context={"calibration": path}), default=str)  # fmt: skip
        except httpx.HTTPStatusError as exc:
            return exc.response.text
        except Exception as exc:  # noqa: BLE001 - langgraph_sdk raises a run's own error as a plain Exception
            return str(exc)

    with opened(server.work / "calibration.fifo") as seen:
        fifo = run_with(str(server.work / "calibration.fifo"))
    exists, missing = run_with("/etc/passwd"), run_with("/no/such/calibration.json")
    outcome.seen += [fifo, exists, missing]
    # A refusal that differs between a file that exists and one that does not answers the question "does it exist".
    oracle = exists.replace("/etc/passwd", "P") != missing.replace("/no/such/calibration.json", "P")
    outcome.flags["trespasses"] = seen[0] or oracle
    outcome.note = f"FIFO opened {seen[0]}, existence told {oracle}"


BIG = 20_000_000  # characters: far above any cap, well below what the machine can hold


@case("server", "a 20 MB earlier message in the history")
def _big_history(outcome: Outcome) -> None:
    server = Server.get()
    alice = server.client("alice")
    thread = alice.threads.create()["thread_id"]
    before = len(server.llm.requests)
    history = [{"role": "user", "content": "refund " * (BIG // 7)}, {"role": "assistant", "content": "Noted."},
               {"role": "user", "content": QUESTION}]  # fmt: skip
    accepted = allowed(outcome, lambda: alice.runs.wait(thread, server.assistant, input={"messages": history}))
    largest = max((len(json.dumps(r.body)) for r in server.llm.requests[before:]), default=0)
    outcome.flags["unbounded"] = largest > 1_000_000
    outcome.note = f"accepted {accepted}, largest prompt {largest:,} bytes"


@case("server", "a 20 MB Command(update=...)")
def _big_update(outcome: Outcome) -> None:
    server = Server.get()
    thread, _ = server.held_thread(outcome)
    command = {"update": {"question": "refund " * (BIG // 7)}, "resume": {"action": "approve"}}
    accepted = allowed(outcome, lambda: server.client("carol").runs.wait(thread, server.assistant, command=command))
    outcome.seen = outcome.seen[:-1] if accepted else outcome.seen  # the echo of 20 MB is not worth scanning twice
    outcome.flags["unbounded"] = accepted
    outcome.note = "accepted" if accepted else "refused"


@case("server", "the server's own log", fast=True)
def _server_log(outcome: Outcome) -> None:
    """Last of the server cases: everything the server wrote while they ran is scanned for the key too."""
    server = Server.get()
    logs = [p for p in Path(tempfile.gettempdir()).glob("selfcrag-server-*/langgraph-dev.log")
            if p.stat().st_mtime >= server.started]  # fmt: skip
    outcome.seen += [p.read_text(errors="replace") for p in logs]
    outcome.note = f"{sum(len(t) for t in outcome.seen):,} characters of server log scanned"
