"""Who may do what on a shared server: a real `langgraph dev` with the operator's identity file (selfcrag/auth.py),
two askers and a reviewer driven through `langgraph_sdk`. Each finding of issue 23 (scope 1) is tried and refused:
another asker's threads, resuming or approving as an asker, reading a held draft (state, history, interrupts, the
thread, stream modes, the store), writing thread state, changing the shared assistant, oversize bodies, no token;
a run lowering the quality bar under review, a turn stopped halfway read by its asker, a deleted thread's case,
an asker erasing a run held for review, a resume of a case that has gone.

One server for the whole module (each start costs seconds of CPU); the operator turns human review on for the
assistant, so every answer an asker gets is one a reviewer could have held.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.schema import Command
from support.langgraph_server import langgraph_dev

from selfcrag.identities import add

pytestmark = pytest.mark.system  # a langgraph dev server

QUESTION = "How long do I have to send back a pair of headphones?"
HOLD = {"min_confidence": 1.0, "caveat_band": 0.0}  # no answer reaches it: every draft is held for review


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("auth")
    identities = work / "identities.json"
    roles = [("alice", "asker"), ("bob", "asker"), ("erin", "asker"), ("carol", "reviewer"), ("olga", "operator")]
    tokens = {name: add(identities, name, role) for name, role in roles}
    env = {"SELFCRAG_AUTH_FILE": str(identities), "SELFCRAG_HOME": str(work / "home")}
    with langgraph_dev(env) as url:
        # The operator turns human review on for the deployment's assistant (docs/deployment.md).
        operator = get_sync_client(url=url, api_key=tokens["olga"])
        (assistant,) = operator.assistants.search(graph_id="selfcrag")
        operator.assistants.update(assistant["assistant_id"], context={"human_review": True})
        yield url, tokens, identities
        operator.assistants.update(assistant["assistant_id"], context={})  # `langgraph dev` keeps assistants


@pytest.fixture(scope="module")
def clients(server):
    url, tokens, _ = server
    return {name: get_sync_client(url=url, api_key=token) for name, token in tokens.items()}


@pytest.fixture(scope="module")
def assistant_id(clients) -> str:
    (assistant,) = clients["alice"].assistants.search(graph_id="selfcrag")
    return assistant["assistant_id"]


@pytest.fixture(scope="module")
def held(clients, assistant_id) -> dict:
    """Alice's question, held for review: what she got back, and the case as the reviewer reads it."""
    alice, carol = clients["alice"], clients["carol"]
    thread = alice.threads.create()["thread_id"]
    result = alice.runs.wait(thread, assistant_id, input={"question": QUESTION}, context=HOLD)
    case = carol.store.get_item(["selfcrag_reviews"], thread)["value"]
    return {"thread": thread, "result": result, "case": case}


def quoting(found: object, text: str, where: str = "") -> list[str]:
    """Where in `found` (a JSON value) `text` appears."""
    if isinstance(found, dict):
        return [p for k, v in found.items() for p in quoting(v, text, f"{where}.{k}")]
    if isinstance(found, list):
        return [p for i, v in enumerate(found) for p in quoting(v, text, f"{where}[{i}]")]
    return [where] if isinstance(found, str) and text in found else []


def refused(call, *says: str) -> str:  # noqa: ANN001
    """The call fails with 401/403/404 and, when given, a body that says each of `says`."""
    with pytest.raises(httpx.HTTPStatusError) as caught:
        call()
    response = caught.value.response
    assert response.status_code in (401, 403, 404), response.text
    for text in says:
        assert text in response.text, response.text
    return response.text


def test_a_request_without_a_valid_token_is_refused_in_one_line(server):
    url, _, _ = server
    assert httpx.get(f"{url}/ok").status_code == 200  # the health check stays open
    # Studio's own scheme header gets no pass either (langgraph.json: disable_studio_auth).
    for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"x-api-key": ""}, {"x-auth-scheme": "langsmith"}):
        response = httpx.post(f"{url}/assistants/search", json={}, headers=headers)
        assert response.status_code == 401
        assert response.json()["detail"].startswith("no valid token: send Authorization: Bearer <token>")


def test_the_servers_own_endpoints_need_a_token_and_its_internal_routes_the_operator(server):
    url, tokens, _ = server
    for path in ("/info", "/metrics", "/docs", "/openapi.json"):
        for headers in ({}, {"Authorization": "Bearer not-a-token"}):
            response = httpx.get(f"{url}{path}", headers=headers)
            assert response.status_code == 401, path
            assert response.json()["detail"].startswith("no valid token"), path
        assert httpx.get(f"{url}{path}", headers={"Authorization": f"Bearer {tokens['alice']}"}).status_code == 200
    # `langgraph dev`'s in-memory runtime would empty every thread, or read one raw, for anyone.
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    response = httpx.post(f"{url}/internal/truncate", json={}, headers=alice)
    assert response.status_code == 403 and "asker alice may not open /internal/truncate" in response.text
    assert httpx.get(f"{url}/internal/debug/thread/x", headers=alice).status_code == 403


def test_the_held_draft_reaches_the_reviewer_and_nothing_the_asker_can_read(clients, assistant_id, held):
    alice, thread, case = clients["alice"], held["thread"], held["case"]
    draft = case["draft_answer"]
    assert "15 days" in draft and case["question"] == QUESTION and case["citations"]
    result = held["result"]
    assert result["decision"] == "human_review" and "awaits review" in result["answer"]
    listed = [t for t in alice.threads.search(limit=100) if t["thread_id"] == thread]
    # The output, the interrupt, the thread's values as it and the search show them, the run records:
    seen = {"output": result, "thread": alice.threads.get(thread), "search": listed, "runs": alice.runs.list(thread)}
    assert quoting(seen, draft.split(" [doc_")[0]) == []  # the offline draft is an evidence sentence: not that either
    (interrupt,) = [i for found in alice.threads.get(thread)["interrupts"].values() for i in found]
    assert interrupt["value"]["review"] == {"store": ["selfcrag_reviews"], "key": thread}
    assert "draft_answer" not in interrupt["value"] and interrupt["value"]["draft_id"] == case["draft_id"]
    # Every other way to the draft is closed to the asker: state, history, the store, joined streams.
    refused(lambda: alice.threads.get_state(thread), "asker alice may not GET")
    refused(lambda: alice.threads.get_history(thread), "asker alice may not POST")
    refused(lambda: alice.store.get_item(["selfcrag_reviews"], thread))
    run_id = alice.runs.list(thread)[0]["run_id"]
    refused(lambda: list(alice.runs.join_stream(thread, run_id)), "may not GET")
    refused(lambda: alice.runs.join(thread, run_id), "may not GET")  # a stopped run's join serves its values
    # A run that may be held streams only progress events to its asker, and they quote no draft.
    spare = alice.threads.create()["thread_id"]
    for mode in ("values", "updates", "debug", "messages", "messages-tuple", "events", "tasks", "checkpoints"):
        refused(lambda mode=mode: list(alice.runs.stream(spare, assistant_id, input={"question": QUESTION},
                                                         context=HOLD, stream_mode=mode)), "streams only")  # fmt: skip
    events = list(alice.runs.stream(spare, assistant_id, input={"question": QUESTION}, context=HOLD,
                                    stream_mode="custom"))  # fmt: skip
    assert any(e.event == "custom" for e in events) and draft not in json.dumps([e.data for e in events])


def test_another_asker_cannot_see_search_run_or_resume_a_thread(clients, assistant_id, held):
    bob, thread = clients["bob"], held["thread"]
    refused(lambda: bob.threads.get(thread))
    assert thread not in json.dumps(bob.threads.search(limit=100))
    assert thread in json.dumps(clients["carol"].threads.search(status="interrupted", limit=100))  # reviewers see all
    refused(lambda: bob.runs.wait(thread, assistant_id, input={"question": QUESTION}))
    refused(lambda: bob.runs.wait(thread, assistant_id, command=Command(resume={"action": "approve"})))
    refused(lambda: bob.threads.delete(thread))
    own = bob.threads.create(metadata={"owner": "alice"})  # a claimed owner is replaced by the real one
    assert own["metadata"]["owner"] == "bob"


def test_askers_cannot_decide_or_write_thread_state_and_reviewers_only_resume(clients, assistant_id, held):
    alice, carol, thread = clients["alice"], clients["carol"], held["thread"]
    forged = {"draft": {"draft_answer": "Forged."}, "answer": "Forged.", "llm_calls": -100000}
    refused(lambda: alice.runs.wait(thread, assistant_id, command=Command(resume={"action": "approve"})),
            "only a reviewer resumes")  # fmt: skip
    refused(lambda: alice.runs.wait(thread, assistant_id, command=Command(update=forged, resume={"action": "approve"})))
    refused(lambda: carol.runs.wait(thread, assistant_id, command=Command(update=forged, resume={"action": "approve"})),
            "carries only `resume`")  # fmt: skip
    refused(lambda: alice.threads.update_state(thread, forged, as_node="prepare"))
    refused(lambda: carol.threads.update_state(thread, forged, as_node="prepare"), "written only by the graph")
    refused(lambda: alice.threads.update(thread, metadata={"owner": "bob"}), "written only by the graph")
    for pause in ({"interrupt_after": ["generate"]}, {"interrupt_before": ["finalize"]}):
        refused(lambda pause=pause: alice.runs.wait(None, assistant_id, input={"question": QUESTION}, **pause),
                "only the operator pauses")  # fmt: skip
    refused(lambda: alice.runs.wait(None, assistant_id, input={"question": QUESTION}, context={"human_review": False}),
            "human review is on for this deployment")  # fmt: skip
    # A run stopped halfway would leave its unchecked draft in the thread's values: only the operator cancels.
    other = alice.threads.create()["thread_id"]
    started = alice.runs.create(other, assistant_id, input={"question": QUESTION})
    refused(lambda: alice.runs.cancel(other, started["run_id"]), "only the operator cancels a run")
    refused(lambda: alice.runs.create(other, assistant_id, input={"question": "?"}, multitask_strategy="interrupt"),
            "only the operator cancels a run")  # fmt: skip
    clients["olga"].runs.join(other, started["run_id"])
    assert clients["carol"].threads.get(thread)["status"] == "interrupted"  # nothing above touched the case


def test_the_reviewer_approves_what_they_read_and_the_record_names_them(clients, assistant_id, held):
    alice, carol, thread, case = clients["alice"], clients["carol"], held["thread"], held["case"]
    stale = carol.runs.wait(thread, assistant_id, command=Command(resume={"action": "approve", "draft_id": "0" * 12}))
    assert stale["decision"] == "human_review"  # a draft other than the one held decides nothing
    assert "is not the one held now" in carol.threads.get_state(thread)["interrupts"][0]["value"]["error"]
    done = carol.runs.wait(thread, assistant_id,
                           command=Command(resume={"action": "approve", "draft_id": case["draft_id"]}))  # fmt: skip
    assert done["decision"] == "answer" and done["answer"] == case["draft_answer"]
    assert done["trace"][-1] == {"node": "human_review", "decision": "answer",
                                 "reason": "reviewer: approve (after 1 unusable reply)",
                                 "reviewer": "carol"}  # fmt: skip
    assert carol.threads.get_state(thread)["values"]["review"]["reviewer"] == "carol"
    assert alice.threads.get(thread)["values"]["answer"] == case["draft_answer"]  # now the asker's to read
    assert carol.store.get_item(["selfcrag_reviews"], thread) is None  # decided: the case waits no more


def test_assistants_are_read_only_to_clients_and_oversize_bodies_stop_at_the_door(server, clients, assistant_id):
    url, tokens, _ = server
    for name in ("alice", "carol"):
        client = clients[name]
        refused(lambda c=client: c.assistants.update(assistant_id, context={"max_llm_calls": 0}),
                "only the operator may update assistants")  # fmt: skip
        refused(lambda c=client: c.assistants.create("selfcrag"), "only the operator may create assistants")
        refused(lambda c=client: c.assistants.delete(assistant_id))
    assert clients["alice"].assistants.get(assistant_id)["graph_id"] == "selfcrag"
    # An assistant the operator made without review streams every mode to its askers (the door read its context).
    # Deleted after: `langgraph dev` keeps assistants across restarts, and other tests expect one per graph.
    relaxed = clients["olga"].assistants.create("selfcrag", assistant_id="5e1fc2a0-0000-4000-8000-000000000001",
                                                context={"human_review": False}, if_exists="do_nothing")  # fmt: skip
    try:
        streamed = list(clients["alice"].runs.stream(None, relaxed["assistant_id"], input={"question": QUESTION},
                                                     stream_mode="updates"))  # fmt: skip
    finally:
        clients["olga"].assistants.delete(relaxed["assistant_id"])
    assert any(part.event == "updates" and "finalize" in part.data for part in streamed)
    (indexer,) = clients["alice"].assistants.search(graph_id="indexer")  # it writes the deployment's index
    refused(lambda: clients["carol"].runs.wait(None, indexer["assistant_id"], input={"documents": []}),
            "adding documents to the index is the operator's")  # fmt: skip
    response = httpx.post(f"{url}/runs/wait", headers={"Authorization": f"Bearer {tokens['alice']}"},
                          json={"assistant_id": assistant_id, "input": {"question": "x" * 2_000_000}})  # fmt: skip
    assert response.status_code == 403
    sent = len(response.request.content)
    limit = "at most 1,000,000 (SELFCRAG_MAX_REQUEST_BYTES)"
    assert response.json()["detail"] == f"the request body has {sent:,} bytes; {limit}"


def test_a_token_added_while_the_server_runs_works_at_once(server):
    url, _, identities = server
    token = add(Path(identities), "dave", "asker")
    dave = get_sync_client(url=url, api_key=token)
    assert dave.threads.create()["metadata"]["owner"] == "dave"


def test_with_review_on_a_run_may_raise_the_quality_bar_but_never_lower_it(clients, assistant_id):
    alice, thread = clients["alice"], clients["alice"].threads.create()["thread_id"]
    ask = {"input": {"question": QUESTION}}
    for looser, named in [({"min_confidence": 0.1}, "min_confidence 0.1 <"), ({"risk": "low"}, "min_context_relevance"),
                          ({"min_confidence": 0.95, "caveat_band": 0.9}, "answers shown from confidence 0.05 <"),
                          ({"review_band": 0.0}, "review_band 0.0 <"), ({"review_spread": 1.0}, "review_spread 1.0 >"),
                          ({"min_groundedness": 0.0, "min_confidence": 1.0}, "min_groundedness 0.0 <")]:  # fmt: skip
        refused(lambda c=looser: alice.runs.wait(thread, assistant_id, context=c, **ask), "never lower it", named)
    # The same settings sent as `configurable` (LangGraph reads them as the run's context) are refused alike.
    refused(lambda: alice.runs.wait(thread, assistant_id, config={"configurable": {"min_confidence": 0.1}}, **ask),
            "never lower it")  # fmt: skip
    # A stateless run's thread is deleted when it ends, and a held case with it: a run that may be held needs one.
    refused(lambda: alice.runs.wait(None, assistant_id, **ask), "needs a thread")
    # The floor is the operator's assistant's bar where it sets one: `general` is looser than its `medical`.
    strict = clients["olga"].assistants.create("selfcrag", assistant_id="5e1fc2a0-0000-4000-8000-000000000002",
                                               context={"human_review": True, "domain": "medical"},
                                               if_exists="do_nothing")  # fmt: skip
    try:
        refused(lambda: alice.runs.wait(thread, strict["assistant_id"], context={"domain": "general"}, **ask),
                "min_confidence")  # fmt: skip
    finally:
        clients["olga"].assistants.delete(strict["assistant_id"])
    stricter = alice.runs.wait(thread, assistant_id, context={"domain": "legal", "review_band": 0.5}, **ask)
    assert stricter["decision"] == "human_review"  # raised, the bar holds this answer for a person


def test_a_turn_stopped_halfway_is_not_readable_until_a_run_finishes_it(clients, assistant_id):
    """The thread a failed or cancelled run leaves holds the unchecked draft. The operator pauses one right after
    `first_draft` to make exactly that thread, deterministically, for the asker Erin."""
    erin, olga = clients["erin"], clients["olga"]
    thread = erin.threads.create()["thread_id"]
    olga.runs.wait(thread, assistant_id, input={"question": QUESTION}, context=HOLD, interrupt_after=["first_draft"])
    draft = olga.threads.get_state(thread)["values"]["answer"]
    assert "15 days" in draft  # what threads.get would serve her
    sentence = draft.split(" [doc_")[0]
    refused(lambda: erin.threads.get(thread), "has not finished")
    refused(lambda: erin.threads.search(limit=100), "has not finished")
    refused(lambda: erin.threads.create(thread_id=thread, if_exists="do_nothing"), "has not finished")
    refused(lambda: clients["bob"].threads.get(thread))  # not his: a 404, saying nothing of its state
    done = erin.runs.wait(thread, assistant_id, input=None, context=HOLD)  # the turn finishes, sealed
    assert done["decision"] == "human_review" and quoting(done, sentence) == []
    assert quoting(erin.threads.get(thread), sentence) == []
    assert thread in json.dumps(erin.threads.search(limit=100))


def test_an_asker_who_disconnects_a_cancelling_stream_reads_no_draft(server, clients, assistant_id):
    """on_disconnect="cancel" is a body field the handlers never see: wherever the run stopped, what the asker can
    read of the thread after quotes no draft (refused while the turn is unfinished). Where the cancel lands is
    timing (offline, the turn usually ends first); the test above makes the stopped thread deterministically."""
    url, tokens, _ = server
    erin, olga = clients["erin"], clients["olga"]
    thread = erin.threads.create()["thread_id"]
    body = {"assistant_id": assistant_id, "input": {"question": QUESTION}, "context": HOLD,
            "stream_mode": ["custom"], "on_disconnect": "cancel"}  # fmt: skip
    headers = {"Authorization": f"Bearer {tokens['erin']}"}
    with httpx.stream("POST", f"{url}/threads/{thread}/runs/stream", json=body, headers=headers) as response:
        assert response.status_code == 200
        next(line for line in response.iter_lines() if line.startswith("event: custom"))  # then hang up
    (run,) = olga.runs.list(thread)
    olga.runs.join(thread, run["run_id"])
    if olga.threads.get_state(thread)["values"].get("decision") == "":  # the cancel landed mid-turn
        refused(lambda: erin.threads.get(thread), "has not finished")
    else:  # the turn ended first: held, and sealed
        case = olga.store.get_item(["selfcrag_reviews"], thread)["value"]
        assert quoting(erin.threads.get(thread), case["draft_answer"].split(" [doc_")[0]) == []


def test_a_held_run_is_the_reviewers_and_a_reviewer_deleting_it_deletes_its_case(clients, assistant_id):
    """Issue 44: the asker erased her own held run (runs.delete), and the reviewer's approve then failed inside the
    graph with a TypeError. While held, only a reviewer or the operator deletes it; a resume of what has gone is
    one line."""
    alice, bob, carol = clients["alice"], clients["bob"], clients["carol"]
    thread = alice.threads.create()["thread_id"]
    alice.runs.wait(thread, assistant_id, input={"question": QUESTION}, context=HOLD)
    (run,) = alice.runs.list(thread)
    assert carol.store.get_item(["selfcrag_reviews"], thread) is not None
    assert "awaiting review" not in refused(lambda: bob.threads.delete(thread))  # not his: a 404, the case stays
    for erase in (lambda: alice.runs.delete(thread, run["run_id"]), lambda: alice.threads.delete(thread),
                  lambda: alice.runs.cancel(thread, run["run_id"]),
                  lambda: alice.threads.prune([thread])):  # fmt: skip
        refused(erase)
    assert "holds an answer awaiting review: only a reviewer or the operator" in refused(
        lambda: alice.runs.delete(thread, run["run_id"]))  # fmt: skip
    assert carol.store.get_item(["selfcrag_reviews"], thread) is not None
    assert alice.threads.get(thread)["status"] == "interrupted"  # nothing of it was erased
    carol.threads.delete(thread)  # the reviewer's to delete, whoever asked
    assert carol.store.get_item(["selfcrag_reviews"], thread) is None
    refused(lambda: carol.threads.get(thread))


def test_a_decided_thread_is_the_askers_again_and_a_resume_of_what_has_gone_is_one_line(clients, assistant_id):
    alice, carol, olga = clients["alice"], clients["carol"], clients["olga"]
    thread = alice.threads.create()["thread_id"]
    alice.runs.wait(thread, assistant_id, input={"question": QUESTION}, context=HOLD)
    (run,) = alice.runs.list(thread)
    olga.runs.delete(thread, run["run_id"])  # the operator may: the thread's checkpoints go with the run
    with pytest.raises(httpx.HTTPStatusError) as caught:
        carol.runs.wait(thread, assistant_id, command=Command(resume={"action": "approve"}))
    assert caught.value.response.status_code == 409
    detail = caught.value.response.json()["detail"]
    assert "\n" not in detail and detail == (f"thread {thread} awaits no review (it was decided, or its run was "
                                             "deleted): nothing to resume")  # fmt: skip
    olga.threads.delete(thread)  # `langgraph dev` keeps threads: its record still says interrupted, with no state
    decided = alice.threads.create()["thread_id"]
    alice.runs.wait(decided, assistant_id, input={"question": QUESTION}, context=HOLD)
    carol.runs.wait(decided, assistant_id, command=Command(resume={"action": "reject"}))
    with pytest.raises(httpx.HTTPStatusError) as again:
        carol.runs.wait(decided, assistant_id, command=Command(resume={"action": "approve"}))
    assert again.value.response.status_code == 409 and "awaits no review" in again.value.response.text
    alice.threads.delete(decided)  # decided: hers to delete again
