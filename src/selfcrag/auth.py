"""Who may do what on a shared LangGraph server (`langgraph.json` "auth"): LangGraph's custom auth, with identities
from the operator's token file (selfcrag/identities.py).

- Every request names a token (`Authorization: Bearer <token>` or `x-api-key: <token>`); no token, an unknown one
  or a server with no identity file is refused in one line. The exception is `langgraph dev` bound to a loopback
  address with no identity file (local development, LangGraph Studio): only this machine reaches it, so every
  request is the operator `developer`, and the server's log says so once. Any other server (another address, a
  tunnel, `langgraph up` or a built image) needs identities.
- A thread belongs to the identity that made it (metadata `owner`); an asker reads, searches, runs and deletes only
  its own. Reviewers read every thread; only a reviewer (or operator) resumes a thread, and only with `resume`.
- Thread state is written by the graph alone: no client but the operator updates a thread's state or metadata,
  sends `Command(update=...)`/`goto`, pauses a run where it likes or starts one from an old checkpoint.
- A held draft is for reviewers (selfcrag/review_case.py keeps it out of an asker's state): an asker may not read
  a thread's state or history, join a run or its stream, or stream a run that may be held in any mode but `custom`;
  nor read a thread whose last turn stopped halfway (failed, or cancelled when its asker disconnected), whose
  values may hold a draft nothing checked, until a run finishes it. Its held case leaves the store with the thread.
- A run held for review is the reviewers': while its thread awaits a decision, only a reviewer (of any asker's
  thread) or the operator deletes it or its runs; prune and cancel are the operator's always. A resume of a thread
  that awaits no decision (decided, or deleted by a reviewer or the operator) is refused in one line (409).
- With review on, a client's run may raise the quality bar the operator set, never lower it (trust_boundary.looser_bar),
  and needs a thread (a stateless run's thread, and its held case, are deleted when it ends).
- Assistants, crons, the store, the `indexer` graph and the MCP/A2A endpoints are the operator's; clients read
  and run the other assistants. An assistant's context holds run settings, the system prompts (assistant settings)
  and what `allow_per_run` opens, checked when it is created or updated; no run, the operator's included, changes
  an assistant setting (the graph takes them from the context of a run this door let in: trust_boundary.DOOR).
- A request body above SELFCRAG_MAX_REQUEST_BYTES (1 MB) is refused at the door, before it is read.
- An identity with a tenant (identities.py) runs with the `tenant` setting its own: its runs retrieve only that
  tenant's documents; a run that sends another tenant is refused in one line (`scope_to_tenant`).
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import os
import re
from collections.abc import Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID, uuid5

from langgraph_sdk import Auth, get_client

from selfcrag.context import ASSISTANT_SETTINGS, OPERATOR_SETTINGS, Context, published_settings
from selfcrag.errors import IdentityError, SettingsError
from selfcrag.identities import FILE_VARIABLE, Identity, IdentityFile
from selfcrag.review_case import REVIEWS
from selfcrag.setting_names import no_such_setting, say_once
from selfcrag.trust_boundary import DOOR, OperatorSettings, looser_bar, resolve

auth = Auth()

DEVELOPER = Identity("developer", "operator")
MAX_REQUEST_BYTES = 1_000_000
SETUP = (f"set {FILE_VARIABLE} to an identity file (add a token: python -m selfcrag.identities add NAME ROLE); "
         "only `langgraph dev` on a loopback address runs without one")  # fmt: skip
DEVELOPING = ("no identity file ({}) on `langgraph dev` at {}: only this machine reaches it, so every request is the "
              "operator `developer`; a server others reach needs identities (docs/deployment.md)")  # fmt: skip
# Paths an asker never opens: a thread's state and history, joined run and thread streams, copies, the v2
# command endpoint, the store, crons and the MCP/A2A faces. A reviewer reads state and history.
ASKER_DENIED = re.compile(r"^/threads/[^/]+/(state|history|stream|copy|commands)|/runs/[^/]+/(stream|join)$"
                          r"|^/threads/prune|^/store|/runs/crons|^/mcp|^/a2a")  # fmt: skip
REVIEWER_DENIED = re.compile(r"^/threads/[^/]+/(stream|copy|commands)|^/threads/prune|/runs/crons|^/mcp|^/a2a")
STREAMING_RUN = re.compile(r"^(/threads/[^/]+)?/runs/stream$")
THREAD = re.compile(r"^/threads/[^/]+/?$")  # threads.get: the thread with its values
# What an asker may stream from a run that may be held for review: progress events carry no answer text.
HELD_STREAM_MODES = {"custom"}
# LangGraph's mark, in a run's configurable, that its caller sent `context` (the server copies configurable into the
# context otherwise).
CONTEXT_GIVEN = "__context_provided__"
# The `indexer` graph's own assistant (LangGraph names a graph's assistant uuid5(its namespace, graph id)): it
# writes the deployment's index, so only the operator runs it.
INDEXER = str(uuid5(UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "indexer"))
# A run stopped halfway leaves its thread the state it had then, which may hold a draft no check or reviewer saw.
CANCEL = "only the operator cancels a run: one stopped halfway leaves a draft no reviewer saw in its thread"
_operator_settings = OperatorSettings()
_files: dict[str, IdentityFile] = {}


async def as_server(call: Coroutine[Any, Any, Any]) -> Any:
    """An in-process call to this server (LangGraph's client without a URL) made by the server itself. The loopback
    client carries the caller's auth context, so the handlers here would run again as the caller (and call back in
    forever); a task in an empty context carries none, and LangGraph applies no handler to it."""
    return await asyncio.create_task(call, context=contextvars.Context())


def refuse(status: int, detail: str) -> Auth.exceptions.HTTPException:
    return Auth.exceptions.HTTPException(status_code=status, detail=detail)


def loopback_dev_server() -> str:
    """This server's URL when it is `langgraph dev` listening on a loopback address only, else "". `langgraph dev`
    (langgraph_api's run_server) marks its process LANGSMITH_LANGGRAPH_API_VARIANT=local_dev with the in-memory
    runtime, and sets LANGGRAPH_API_URL from the address it binds (`--host`; a tunnel's URL with `--tunnel`), after
    reading `.env`, so neither `.env` nor the shell can make a server that others reach look like one. An image
    from `langgraph build` / `langgraph up` runs the server without run_server, so it never is one."""
    if os.environ.get("LANGSMITH_LANGGRAPH_API_VARIANT") != "local_dev":
        return ""
    if os.environ.get("LANGGRAPH_RUNTIME_EDITION", "inmem") != "inmem":
        return ""
    url = os.environ.get("LANGGRAPH_API_URL", "")
    host = urlsplit(url).hostname or ""
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    return url if local else ""


def identity_of(token: str) -> Identity | None:
    """The identity a token names, under the operator's configuration (raises when there is none)."""
    path = os.environ.get(FILE_VARIABLE, "").strip()
    if not path:  # identities, when the operator gave some, are used on a loopback dev server too
        if url := loopback_dev_server():
            say_once(DEVELOPING.format(FILE_VARIABLE, url))  # once a process (LangGraph may load this file twice)
            return DEVELOPER
        raise refuse(401, f"this server has no identities: {SETUP}")
    known = _files.setdefault(path, IdentityFile(Path(path)))
    try:
        return known.lookup(token) if token else None
    except IdentityError as exc:
        raise refuse(401, f"this server's identities cannot be read ({exc}): {SETUP}") from None


NO_TOKEN = "no valid token: send Authorization: Bearer <token> (ask the operator for one)"


def caller(headers: dict[bytes, bytes]) -> Identity:
    """Who sent a request, from its `Authorization: Bearer` or `x-api-key` header; refused (401) when no one."""
    bearer = headers.get(b"authorization", b"").decode("latin-1").strip()
    token = bearer[7:] if bearer.lower().startswith("bearer ") else headers.get(b"x-api-key", b"").decode("latin-1")
    who = identity_of(token.strip())
    if who is None:
        raise refuse(401, NO_TOKEN)
    return who


def body_limit() -> int:
    try:
        return int(os.environ.get("SELFCRAG_MAX_REQUEST_BYTES", "") or MAX_REQUEST_BYTES)
    except ValueError:
        return MAX_REQUEST_BYTES


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes], path: str, method: str, query_params: Any) -> dict[str, Any]:
    length, limit = headers.get(b"content-length"), body_limit()
    if length is not None and length.isdigit() and int(length) > limit:
        raise refuse(403, f"the request body has {int(length):,} bytes; at most {limit:,} (SELFCRAG_MAX_REQUEST_BYTES)")
    if length is None and b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        raise refuse(403, "a request body of unknown length (chunked) is refused; send Content-Length")
    who = caller(headers)
    denied = {"asker": ASKER_DENIED, "reviewer": REVIEWER_DENIED}.get(who.role)
    if denied is not None and denied.search(path):
        raise refuse(403, f"{who.role} {who.name} may not {method} {path}")
    if who.role != "operator" and str(query_params.get("cancel_on_disconnect", "")).lower() in ("true", "yes", "1"):
        raise refuse(403, CANCEL)
    # `streaming` tells the run handler whether this request streams the run's events back to its sender;
    # `reads_values` the thread handler whether it returns a thread's values.
    return {"identity": who.name, "role": who.role, "permissions": who.permissions, "tenant": who.tenant,
            DOOR[0]: DOOR[1],
            "streaming": bool(STREAMING_RUN.match(path)),
            "reads_values": method == "GET" and bool(THREAD.match(path))}  # fmt: skip


def user(ctx: Auth.types.AuthContext, key: str) -> Any:
    """A field `authenticate` gave the caller (LangGraph wraps the dict it returned)."""
    get = getattr(ctx.user, "get", None)
    return get(key) if callable(get) else None


def role(ctx: Auth.types.AuthContext) -> str:
    return str(user(ctx, "role") or "")


def owned(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """Stamp the caller as the owner of what it creates, and filter what it may touch to what it owns."""
    metadata = value.get("metadata")
    if isinstance(metadata, dict):
        metadata["owner"] = ctx.user.identity
    else:
        value["metadata"] = {"owner": ctx.user.identity}
    return {"owner": ctx.user.identity}


def unfinished(values: Any) -> bool:
    """Whether a thread's values are those of a turn that stopped halfway: `prepare` opens every turn with an empty
    `decision` and only `finalize` sets it, so a failed or cancelled run leaves it empty beside a draft nothing
    checked (`answer`, `candidates`, the passages)."""
    return isinstance(values, dict) and values.get("decision") == ""


PAGE = 500  # threads read at a time when an asker's search is checked
STOPPED = ("thread {} is in a turn that has not finished (its run is running, failed or was cancelled) and may "
           "hold an answer nothing checked: answers come from runs.wait, and a run with input null finishes a "
           "stopped turn")  # fmt: skip


async def at_rest(ctx: Auth.types.AuthContext, thread_id: Any) -> None:
    """Refuse an asker the values of its own thread while they are a turn stopped halfway. Another's thread or a
    missing one is left to the owner filter's 404."""
    try:
        thread = await as_server(get_client().threads.get(str(thread_id)))
    except Exception:  # noqa: BLE001 (no such thread: the request fails on its own)
        return
    if (thread.get("metadata") or {}).get("owner") == ctx.user.identity and unfinished(thread.get("values")):
        raise refuse(403, STOPPED.format(thread_id))


@auth.on.threads.create
async def create_thread(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    if role(ctx) == "asker" and value.get("if_exists") == "do_nothing" and value.get("thread_id"):
        await at_rest(ctx, value["thread_id"])  # "create" an existing thread: LangGraph returns it, values and all
    return owned(ctx, value)


@auth.on.threads.read
async def read_thread(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    if role(ctx) != "asker":
        return None
    if user(ctx, "reads_values"):
        await at_rest(ctx, value.get("thread_id"))
    return {"owner": ctx.user.identity}


@auth.on.threads.search
async def search_threads(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    if role(ctx) != "asker":
        return None
    # A search returns each thread's values: none of the asker's may be a turn stopped halfway. Read page by page
    # (LangGraph's in-memory `values` filter fails on a thread without values, so the check is made here).
    client, offset = get_client(), 0
    while page := await as_server(client.threads.search(metadata={"owner": ctx.user.identity}, limit=PAGE,
                                                        offset=offset, select=["thread_id", "values"])):
        if stopped := [t["thread_id"] for t in page if unfinished(t.get("values"))]:
            raise refuse(403, STOPPED.format(stopped[0]))
        offset += PAGE
    return {"owner": ctx.user.identity}


HELD = ("thread {} holds an answer awaiting review: only a reviewer or the operator deletes it or its runs until "
        "it is decided")  # fmt: skip


async def thread_of(thread_id: str, state: bool = False) -> dict[str, Any] | None:
    """The thread (or, `state`, its state from its checkpoints: the thread's own record keeps the status and
    values it had when a run's checkpoints were deleted), read by the server itself; None when there is none."""
    threads = get_client().threads
    try:
        found = await as_server(threads.get_state(thread_id) if state else threads.get(thread_id))
    except Exception:  # noqa: BLE001 (no such thread: the request fails on its own)
        return None
    return dict(found)


@auth.on.threads.delete
async def delete_thread(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    """threads.delete and runs.delete (which deletes the thread's checkpoints too). A thread held for review is
    the reviewers' until decided: its asker deleting it, or its run, would erase the case under the reviewer."""
    thread_id = str(value.get("thread_id"))
    thread = await thread_of(thread_id)
    mine = None if role(ctx) == "operator" else {"owner": ctx.user.identity}
    # Another asker's thread is left to the owner filter's 404, which says nothing of its state.
    owner = ((thread or {}).get("metadata") or {}).get("owner")
    seen = thread is not None and (role(ctx) == "reviewer" or owner == ctx.user.identity)
    if seen and mine is not None and ((await thread_of(thread_id, state=True)) or {}).get("interrupts"):
        if role(ctx) != "reviewer":
            raise refuse(403, HELD.format(thread_id))
        mine = None  # a reviewer deletes a held thread whoever asked
    if thread is not None:
        await forget_case(thread_id, thread, mine)
    return mine


async def forget_case(thread_id: str, thread: dict[str, Any], mine: dict[str, str] | None) -> None:
    """A deleted thread takes its held case out of the review store (review_case.py), when the caller may delete
    the thread: nothing would resume it, and the draft would wait there for no one."""
    if mine is not None and (thread.get("metadata") or {}).get("owner") != mine["owner"]:
        return  # the owner filter refuses this delete
    try:
        await as_server(get_client().store.delete_item(list(REVIEWS), thread_id))
    except Exception as exc:  # noqa: BLE001 (keep the thread rather than orphan its case)
        raise refuse(503, f"the held case of thread {thread_id} could not be removed ({exc}); try again") from None


@auth.on.threads.update
async def update_thread(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    if role(ctx) == "operator":
        return None
    if value.get("action") in ("interrupt", "rollback"):
        raise refuse(403, CANCEL)
    raise refuse(403, "a thread's state and metadata are written only by the graph (and the operator)")


OFF = (False, 0, "false", "0", "")


def turned_on(context: dict[str, Any]) -> bool:
    return context.get("human_review") not in (None, *OFF)


async def assistant_context(assistant_id: Any) -> dict[str, Any] | None:
    """The run's assistant's context (the operator's), read in process with LangGraph's client without a URL;
    None when it cannot be read."""
    try:
        assistant = await as_server(get_client().assistants.get(str(assistant_id)))
    except Exception:  # noqa: BLE001 (the caller fails closed)
        return None
    context = assistant.get("context")
    return context if isinstance(context, dict) else {}


def review_required(context: dict[str, Any] | None) -> bool:
    """Whether the operator turned human review on: in the environment, or in the run's assistant's `context`.
    An assistant that cannot be read (None) counts as on."""
    return _operator_settings().human_review or context is None or turned_on(context)


def loosened(run: dict[str, Any], assistant: dict[str, Any]) -> list[str]:
    """Where the run's context lowers the quality bar the operator set (environment, then the assistant). Only run
    settings are read (values, checked against the operator's caps): no operator setting a client sent, such as a
    file path, is validated or opened here."""
    def bar(context: dict[str, Any]) -> dict[str, Any]:
        return {n: v for n, v in context.items() if n in Context.model_fields and n not in OPERATOR_SETTINGS}

    base = _operator_settings()
    try:
        return looser_bar(resolve(bar({**assistant, **run}), base), resolve(bar(assistant), base))
    except SettingsError as exc:
        raise refuse(403, str(exc)) from None


def unknown_settings(context: Any, configurable: dict[str, Any]) -> str:
    """The keys of a run's `context` that name no setting, one phrase each ("" when none), for every caller: the
    server drops such keys before the graph sees them, so a misspelt setting would run as if never sent. A
    `context` LangGraph copied from `config["configurable"]` (no CONTEXT_GIVEN mark) is not checked: configurable
    holds other keys too."""
    if not isinstance(context, dict) or not configurable.get(CONTEXT_GIVEN):
        return ""
    return "; ".join(no_such_setting(str(name), Context.model_fields) for name in context
                     if name not in Context.model_fields)  # fmt: skip


def refuse_unpublished(context: Any, configurable: dict[str, Any]) -> None:
    """Refuse, in one line, a run whose own `context` sets an operator setting the graph does not publish: 422 for
    a value that is no valid setting, 403 for a value of its own (a run may repeat the operator's value or the
    default, as a form that sends every field does). The server would drop those keys before the graph's trust
    boundary sees them (context.published_settings), so the boundary's refusal is given here, in its words, to
    every caller, the operator too. Only a context the client gave is read, as in `unknown_settings`."""
    if not isinstance(context, dict) or not configurable.get(CONTEXT_GIVEN):
        return
    shown = published_settings()
    hidden = {n: v for n, v in context.items() if n in Context.model_fields and n not in shown}
    if not hidden:
        return
    try:
        asked = Context(**hidden)
    except SettingsError as exc:
        raise refuse(422, str(exc)) from None
    try:
        resolve(asked, _operator_settings())
    except SettingsError as exc:
        raise refuse(403, str(exc)) from None


def scope_to_tenant(ctx: Auth.types.AuthContext, kwargs: dict[str, Any]) -> None:
    """Set the run's `tenant` to its caller's, when the caller's identity has one: the run then retrieves only that
    tenant's documents (knowledge/scoped.py). Written where the server reads the run's settings from (its `context`,
    and `configurable`, which mirrors it), so nothing the client sent can widen it; a different tenant the client
    asked for is refused, not silently replaced."""
    tenant = str(user(ctx, "tenant") or "")
    if not tenant:
        return
    context = kwargs.get("context") if isinstance(kwargs.get("context"), dict) else None
    configurable = (kwargs.get("config") or {}).get("configurable")
    for sent in (context, configurable):
        if isinstance(sent, dict) and sent.get("tenant") not in (None, "", tenant):
            raise refuse(403, f"{ctx.user.identity} retrieves only tenant {tenant!r}'s documents: a run may not set "
                              f"tenant {str(sent['tenant'])[:80]!r}")
    kwargs["context"] = {**(context or {}), "tenant": tenant}
    if isinstance(configurable, dict):
        configurable["tenant"] = tenant


def changed_by_run(context: dict[str, Any], assistant: dict[str, Any] | None) -> list[str]:
    """The assistant settings a run's own context would change: each may only repeat the value the run gets anyway,
    its assistant's, else the operator's. An assistant that cannot be read (None) lets none through."""
    try:
        base = _operator_settings()
    except SettingsError as exc:  # the operator's settings cannot be made: no run could start anyway
        raise refuse(403, str(exc)) from None
    return [name for name in sorted(ASSISTANT_SETTINGS & set(context))
            if assistant is None or context[name] != assistant.get(name, getattr(base, name))]  # fmt: skip


def assistant_settings(name: str) -> str:
    return (f"{name} is an assistant setting: a run may not change it; the operator sets it on the assistant "
            f"(assistants.create or assistants.update, context={{...}}), in the environment (SELFCRAG_{name.upper()}) "
            "or with build_graph(settings=...)")  # fmt: skip


async def resumable(value: Any, command: Any) -> None:
    """Refuse a resume of a thread that awaits no decision (decided, or its case deleted) in one line: run, it
    would start the graph on nothing and fail inside it. Asked only for callers that read every thread."""
    if not (isinstance(command, dict) and "resume" in command and value.get("thread_id") is not None):
        return
    state = await thread_of(str(value["thread_id"]), state=True)
    if state is not None and not state.get("next"):  # a run in flight has a next step: it may yet pause
        raise refuse(409, f"thread {value['thread_id']} awaits no review (it was decided, or its run was deleted): "
                          "nothing to resume")  # fmt: skip


@auth.on.threads.create_run
async def create_run(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    kwargs = value.get("kwargs") or {}
    configurable = (kwargs.get("config") or {}).get("configurable") or {}
    if misspelt := unknown_settings(kwargs.get("context"), configurable):
        raise refuse(422, f"invalid settings: {misspelt}")
    refuse_unpublished(kwargs.get("context"), configurable)
    own = kwargs.get("context") or {}
    prompts = isinstance(own, dict) and bool(ASSISTANT_SETTINGS & set(own))  # the graph takes them from runs let in
    if prompts and (changed := changed_by_run(own, await assistant_context(value.get("assistant_id")))):
        raise refuse(403, assistant_settings(changed[0]))
    command = kwargs.get("command")
    if role(ctx) == "operator":
        await resumable(value, command)
        return None
    scope_to_tenant(ctx, kwargs)
    if str(value.get("assistant_id")) == INDEXER:
        raise refuse(403, "adding documents to the index is the operator's")
    if kwargs.get("interrupt_before") or kwargs.get("interrupt_after"):
        raise refuse(403, "only the operator pauses a run at a node (interrupt_before / interrupt_after)")
    if any(configurable.get(key) for key in ("checkpoint_id", "checkpoint_ns", "checkpoint_map")):
        raise refuse(403, "only the operator starts a run from a chosen checkpoint")
    if kwargs.get("webhook"):
        raise refuse(403, "only the operator sets a webhook")
    if value.get("multitask_strategy") in ("interrupt", "rollback"):
        raise refuse(403, CANCEL)
    if command:
        if role(ctx) != "reviewer":
            raise refuse(403, "only a reviewer resumes a thread held for review")
        if set(command) - {"resume"}:
            raise refuse(403, "a reviewer's command carries only `resume`: thread state is written by the graph")
        await resumable(value, command)
        return None  # a reviewer decides on any thread
    context = kwargs.get("context") or {}
    operators = await assistant_context(value.get("assistant_id"))
    required = review_required(operators)
    if required and context.get("human_review") in OFF and "human_review" in context:
        raise refuse(403, "human review is on for this deployment: a run may not turn it off")
    if required and (looser := loosened(context, operators or {})):
        raise refuse(403, "human review is on for this deployment: a run may raise its quality bar, never lower it "
                          f"({'; '.join(looser)})")  # fmt: skip
    if required and value.get("thread_id") is None:
        raise refuse(403, "a run that may be held for review needs a thread (threads.create, or a thread id with "
                          "if_not_exists='create'): a stateless run's thread and held case are deleted when it ends")
    modes = set(kwargs.get("stream_mode") or [])
    if user(ctx, "streaming") and modes - HELD_STREAM_MODES and (required or turned_on(context)):
        raise refuse(403, f"a run that may be held for review streams only {sorted(HELD_STREAM_MODES)} to its "
                          f"asker, not {sorted(modes - HELD_STREAM_MODES)}; its answer comes from runs.wait or "
                          "runs.join")  # fmt: skip
    return owned(ctx, value)


def assistant_problem(value: Any) -> str:
    """Why an assistant's settings cannot serve, in one line ("" when they can): a misspelt key, a value that
    is no valid setting (a system prompt without a placeholder its role needs, ...), or an operator setting the
    assistant may not set. Checked where the operator writes it, so that no run of it fails for it later."""
    context = value.get("context") or {}
    configurable = (value.get("config") or {}).get("configurable") or {}
    if not isinstance(context, dict) or not isinstance(configurable, dict):
        return ""
    if misspelt := [no_such_setting(str(n), Context.model_fields) for n in context if n not in Context.model_fields]:
        return "invalid settings: " + "; ".join(misspelt)
    given = {n: v for n, v in {**configurable, **context}.items() if n in Context.model_fields}
    try:
        made = Context(**given)
    except SettingsError as exc:
        return str(exc)
    base, fields = _operator_settings(), Context.model_fields
    fixed = [n for n in sorted(made.model_fields_set & OPERATOR_SETTINGS - ASSISTANT_SETTINGS - set(base.allow_per_run))
             if getattr(made, n) not in (getattr(base, n), fields[n].default)]  # fmt: skip
    if fixed:
        return (f"{fixed[0]} is an operator setting an assistant may not set (an assistant sets run settings and the "
                f"system prompts): the deployment sets it in the environment (SELFCRAG_{fixed[0].upper()})")
    return ""


@auth.on.assistants.create
async def create_assistant(ctx: Auth.types.AuthContext, value: Any) -> None:
    await operator_only(ctx, value)
    if problem := assistant_problem(value):
        raise refuse(422, problem)


@auth.on.assistants.update
async def update_assistant(ctx: Auth.types.AuthContext, value: Any) -> None:
    await operator_only(ctx, value)
    if problem := assistant_problem(value):
        raise refuse(422, problem)


@auth.on.assistants.read
async def read_assistant(ctx: Auth.types.AuthContext, value: Any) -> None:
    return None  # every client reads and runs the deployment's assistants


@auth.on.assistants.search
async def search_assistants(ctx: Auth.types.AuthContext, value: Any) -> None:
    return None


@auth.on.store
async def store(ctx: Auth.types.AuthContext, value: Any) -> None:
    if role(ctx) == "operator":
        return None
    namespace = tuple(value.get("namespace") or ())
    reading = ctx.action in ("get", "search", "list_namespaces")
    if role(ctx) == "reviewer" and reading and namespace[:1] == REVIEWS:
        return None
    raise refuse(403, f"the store is the operator's (a reviewer reads {REVIEWS[0]})")


@auth.on
async def operator_only(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Everything not allowed above (assistant writes, crons, ...) is the operator's."""
    if role(ctx) != "operator":
        raise refuse(403, f"only the operator may {ctx.action} {ctx.resource}")
