"""Every model call of an evaluation, recorded to a JSONL file, and replayed from one at no model cost.

`CallFile` is a LangChain `BaseCache`: installed with `set_llm_cache` (`installed`), every chat model built with the
default `cache=None` (ours are: llm/models.py) asks it before calling its server and hands it the reply after.
- Recording (no `replay`): a lookup never answers, so every call is made and measured as it always was (plain RAG
  pays for its own calls even when the graph made the same one); each reply is appended to `path`.
- Replaying (`replay` names an earlier run's file): a lookup answers from that file, and nothing reaches the model.
  A call the file does not hold raises `CallNotRecorded` inside the call (so no request is sent) and is counted in
  `misses`; the evaluation then stops with one line. With `live_misses` such a call is made instead and recorded.
  Either way `path` receives every call this run rests on, so the new folder can itself be replayed.

The key is everything that changes the reply: the messages as LangChain serialises them, and the model's
serialised settings (class, model name, temperature, max_tokens, logprobs and top_logprobs, logit_bias, seed ...)
with the call's own parameters (stop, response_format or tools, structured-output schema), less what only says how
to reach the server (`TRANSPORT`: its address, key, timeouts, retries): a replay against a server on another port is
the same call. A key the file holds more than once (two systems, one prompt) replays its replies in recorded order.

A reply is stored as LangChain's message dict (`message_to_dict`), so what the graders read survives a replay: the
first-token `logprobs` in `response_metadata`, `usage_metadata` (tokens), tool calls and parsed structure. LangChain
adds `total_cost: 0` to the usage of a cache hit; the token counts stay.

A call that failed (a timeout, a 503, a method the server refused) is recorded too, as a `fault`: its line for the
trace, its HTTP status, and whether calls.py tried it again. Replayed, it fails the same way at once (`ReplayedFault`)
and is retried only if it was then, so a run that met faults replays to the same decisions. calls.py marks each
attempt (`attempt`); the lookups made inside it are the calls it rests on. A reply that arrives after its attempt
gave up (a call abandoned at its deadline, finishing later in its thread) is not recorded: the run never used it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.globals import get_llm_cache, set_llm_cache
from langchain_core.messages import message_to_dict, messages_from_dict
from langchain_core.outputs import ChatGeneration, Generation

from selfcrag.errors import CallNotRecorded, ReplayedFault
from selfcrag.prompts.evidence import KEY_HEX, TAGS

# A fence tag with its key, as prompts/evidence.block writes it (the tag names are evidence.TAGS).
FENCE_KEY = re.compile(rf"(</?(?:{'|'.join(TAGS)}))-[0-9a-f]{{{KEY_HEX}}}\b")

# Serialised model settings that say how to reach a server, not what it replies (LangChain's field names for
# OpenAI-compatible and other providers' chat models).
TRANSPORT = frozenset({"openai_api_base", "base_url", "openai_api_key", "api_key", "openai_organization",
                       "openai_proxy", "request_timeout", "timeout", "max_retries", "stream_usage", "streaming",
                       "default_headers", "default_query", "http_client", "http_async_client"})  # fmt: skip


def call_key(prompt: str, llm_string: str) -> tuple[str, dict[str, Any]]:
    """The call's key (sha256 hex) and what it was made from that a reader wants to see: the model's settings
    without `TRANSPORT` and the call's parameters. `llm_string` is LangChain's: the model's serialised JSON,
    "---", the call's parameters (a serialisable model), or the parameters alone (any other model)."""
    head, sep, params = llm_string.partition("---")
    try:
        model = json.loads(head) if sep else None
    except ValueError:
        model = None
    if isinstance(model, dict) and isinstance(model.get("kwargs"), dict):
        settings = {k: v for k, v in model["kwargs"].items() if k not in TRANSPORT}
        name = settings.get("model_name") or settings.get("model") or (model.get("id") or ["?"])[-1]
        described = {"model": str(name), "settings": settings, "params": params}
        basis = json.dumps({"id": model.get("id"), "settings": settings}, sort_keys=True) + "---" + params
    else:
        described, basis = {"params": llm_string}, llm_string
    return hashlib.sha256(f"{basis}\n{unfenced(prompt)}".encode()).hexdigest(), described


def unfenced(prompt: str) -> str:
    """The prompt with every fence key (prompts/evidence.py: a hash of what the prompt shows; recordings made before
    it was drew one at random) replaced by one placeholder: the same question over the same evidence is the same
    call, in recordings of either kind."""
    return FENCE_KEY.sub(r"\1-KEY", prompt)


def _messages(prompt: str) -> list[dict[str, str]]:
    """The prompt's messages as (role, content) for a reader of the file."""
    try:
        raw = json.loads(prompt)
    except ValueError:
        return [{"role": "?", "content": prompt}]
    shown = []
    for item in raw if isinstance(raw, list) else []:
        kwargs = item.get("kwargs", {}) if isinstance(item, dict) else {}
        role = str((item.get("id") or ["?"])[-1]) if isinstance(item, dict) else "?"
        shown.append({"role": role.removesuffix("Message").lower(), "content": str(kwargs.get("content", ""))})
    return shown


def _stored(generation: Generation) -> dict[str, Any]:
    if isinstance(generation, ChatGeneration):
        return {"message": message_to_dict(generation.message), "info": generation.generation_info}
    return {"text": generation.text, "info": generation.generation_info}


def _restored(stored: dict[str, Any]) -> Generation:
    if "message" in stored:
        return ChatGeneration(message=messages_from_dict([stored["message"]])[0], generation_info=stored.get("info"))
    return Generation(text=str(stored.get("text", "")), generation_info=stored.get("info"))


def recorded_calls(path: Path) -> Path:
    """The calls file `--replay` names: the file itself, or a run folder's `calls.jsonl` (or `calls.jsonl.gz`, as
    results kept in the repository hold it)."""
    if not path.is_dir():
        return path
    plain = path / "calls.jsonl"
    return plain if plain.exists() or not (path / "calls.jsonl.gz").exists() else path / "calls.jsonl.gz"


def read_calls(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Each key's recorded outcomes, in order, from a calls file, gzipped or not (a torn last line is left out):
    `{"reply": [...]}` or `{"fault": {...}}`. Raises CallNotRecorded (one line) when the file cannot be read or a
    complete line is not a call."""
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
    except (OSError, EOFError) as exc:
        raise CallNotRecorded(f"cannot read recorded calls from {path}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    calls: dict[str, list[dict[str, Any]]] = {}
    for number, line in enumerate(data[: data.rfind(b"\n") + 1].splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            entry = {"fault": dict(row["fault"])} if "fault" in row else {"reply": list(row["reply"])}
            calls.setdefault(str(row["key"]), []).append(entry)
        except (ValueError, KeyError, TypeError):
            raise CallNotRecorded(f"{path} line {number} is not a recorded call") from None
    return calls


@dataclass
class Attempt:
    """One attempt of one logical call (calls.py): the lookups made inside it, those answered, and whether it is
    over. A recording learns from it which calls a fault ended, and that a late reply was never used."""

    asked: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)  # (key, described, prompt)
    answered: set[str] = field(default_factory=set)
    over: bool = False

    def failed(self, error: BaseException, *, retried: bool, note: str = "") -> None:
        """The attempt ended with `error`: the installed recording keeps it as each unanswered call's outcome."""
        self.over = True
        calls = get_llm_cache()
        if isinstance(calls, CallFile) and not isinstance(error, CallNotRecorded):
            calls.record_fault(self, error, retried=retried, note=note)


_ATTEMPT: ContextVar[Attempt | None] = ContextVar("selfcrag_call_attempt", default=None)


@contextmanager
def attempt() -> Iterator[Attempt]:
    """Marks one attempt of a model call: the cache lookups made inside it (in any thread that copied this context)
    belong to it."""
    made = Attempt()
    token = _ATTEMPT.set(made)
    try:
        yield made
    finally:
        made.over = True
        _ATTEMPT.reset(token)


def _fault(error: BaseException, retried: bool, note: str) -> dict[str, Any]:
    from selfcrag.llm.faults import describe, status_of

    return {"described": describe(error), "status": status_of(error), "retried": retried, "note": note}


class CallFile(BaseCache):
    """Records every call to `path` (appending to what it holds when `append`: a resumed run); with `replay`, answers
    calls from that file."""

    def __init__(self, path: Path, replay: Path | None = None, *, live_misses: bool = False,
                 append: bool = False) -> None:  # fmt: skip
        self.path = path
        self.replay = replay
        self.live_misses = live_misses
        self._recorded = read_calls(replay) if replay is not None else {}
        self._used: dict[str, int] = {}
        self._lock = threading.Lock()
        self.hits = 0  # calls answered from `replay`
        self.misses = 0  # calls `replay` did not hold (made live only with `live_misses`)
        self.first_miss = ""  # what the first missing call was, for the one-line error
        # A resumed replay of the file it appends to must not write its own hits into it again.
        self._echo = not (append and replay is not None and replay.resolve() == path.resolve())
        if not append:  # a new run: the file holds this run's calls only, and exists once one is made
            path.unlink(missing_ok=True)

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        made = _ATTEMPT.get()
        if self.replay is None and made is None:  # recording outside calls.py: nothing to note before the reply
            return None
        key, described = call_key(prompt, llm_string)
        if made is not None:
            made.asked.append((key, described, prompt))
        if self.replay is None:
            return None
        with self._lock:
            replies = self._recorded.get(key)
            if not replies:
                self.misses += 1
                if not self.first_miss:
                    last = (_messages(prompt) or [{"content": ""}])[-1]["content"]
                    self.first_miss = f"model {described.get('model') or '?'}, {last[:80]!r}"
                if self.live_misses:
                    return None
                raise CallNotRecorded(f"this call is not in {self.replay}: {self.first_miss}")
            used = self._used.get(key, 0)
            self._used[key] = used + 1
            self.hits += 1
            entry = replies[min(used, len(replies) - 1)]
        if "fault" in entry:  # it failed when recorded: it fails again, as then (echoed by `record_fault`)
            fault = entry["fault"]
            raise ReplayedFault(str(fault.get("described", "")), fault.get("status"), bool(fault.get("retried")),
                                str(fault.get("note", "")))  # fmt: skip
        if made is not None:
            made.answered.add(key)
        if self._echo:
            self._write(key, described, prompt, {"reply": entry["reply"]})
        return [_restored(stored) for stored in entry["reply"]]

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        key, described = call_key(prompt, llm_string)
        if (made := _ATTEMPT.get()) is not None:
            if made.over:  # its attempt gave up on it (a deadline): the run never used this reply
                return
            made.answered.add(key)
        self._write(key, described, prompt, {"reply": [_stored(g) for g in return_val]})

    def record_fault(self, made: Attempt, error: BaseException, *, retried: bool, note: str = "") -> None:
        """Each call of `made` that got no reply ended with `error`: kept as its outcome, for a replay to meet."""
        if self.replay is not None and not self._echo:
            return
        for key, described, prompt in made.asked:
            if key not in made.answered:
                self._write(key, described, prompt, {"fault": _fault(error, retried, note)})

    def _write(self, key: str, described: dict[str, Any], prompt: str, outcome: dict[str, Any]) -> None:
        line = json.dumps({"key": key, **described, "messages": _messages(prompt), **outcome},
                          ensure_ascii=False, default=str)  # fmt: skip
        with self._lock, self.path.open("a", encoding="utf-8") as sink:
            sink.write(line + "\n")

    def clear(self, **kwargs: Any) -> None:
        """Forget what this run used of the replayed file (the files themselves are left as they are)."""
        with self._lock:
            self._used.clear()


@contextmanager
def installed(calls: CallFile | None) -> Iterator[CallFile | None]:
    """`calls` as LangChain's process-wide model cache while the block runs (nothing changes for None); the cache
    that was there before comes back after."""
    if calls is None:
        yield None
        return
    before = get_llm_cache()
    set_llm_cache(calls)
    try:
        yield calls
    finally:
        set_llm_cache(before)
