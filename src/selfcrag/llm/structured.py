"""Validated JSON out of any chat model, whatever its server supports.

Methods, in order: json_schema (OpenAI structured outputs), function calling, JSON mode, and a plain prompt.
The first two carry the schema in the API request; for the other two the schema is appended to the system
prompt, so the plain prompt works on any chat model. A server that rejects a method (HTTP 400/422, or a model
class without it) gets the next one, and the method that worked is remembered per model. A reply that is not
clean JSON (prose around it, a code fence, trailing commas, Python literals) is parsed leniently; one that still
does not validate is a fault the component degrades from.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar

from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.constants import TAG_NOSTREAM
from pydantic import BaseModel, BeforeValidator, ValidationError

from selfcrag.errors import MethodUnavailable
from selfcrag.llm.calls import Outcome, call_all, max_tokens, reply_chars
from selfcrag.llm.faults import describe, status_of
from selfcrag.prompts.tokens import count_tokens

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels

METHODS = ("json_schema", "function_calling", "json_mode", "prompt")
T = TypeVar("T", bound=BaseModel)

# Grader calls are not part of the answer: their config keeps them out of stream_mode="messages".
NOT_STREAMED: dict[str, Any] = {"tags": [TAG_NOSTREAM]}


# --- lenient field types ---------------------------------------------------------------------------------------


def _clamp01(value: Any) -> float:
    if isinstance(value, str) and value.strip().endswith("%"):  # "80%"
        value = float(value.strip()[:-1]) / 100
    return min(1.0, max(0.0, float(value)))


Score = Annotated[float, BeforeValidator(_clamp01)]  # any number, clamped to [0, 1]


def normalised(synonyms: dict[str, str]) -> Callable[[Any], Any]:
    """A before-validator for a Literal label: case and spacing ignored, common synonyms mapped."""

    def normalise(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        key = " ".join(value.strip().lower().replace("_", " ").replace("-", " ").split())
        return synonyms.get(key, key.replace(" ", "_"))

    return normalise


# --- calls -------------------------------------------------------------------------------------------------------


@dataclass
class Reply(Generic[T]):
    """One structured call's result: the validated value, or the fault the caller degrades from."""

    value: T | None
    calls: int = 0
    tokens: int = 0
    error: str = ""


def ask(models: ChatModels, model: BaseChatModel, schema: type[T], messages: list[BaseMessage], settings: Context,
        role: str) -> Reply[T]:  # fmt: skip
    return ask_many(models, model, schema, [messages], settings, role)[0]


def ask_many(models: ChatModels, model: BaseChatModel, schema: type[T], conversations: list[list[BaseMessage]],
             settings: Context, role: str, items: int = 1) -> list[Reply[T]]:  # fmt: skip
    """One structured call per conversation, all at once, each capped at `role`'s completion tokens (`items`
    scales a per-passage role) and within the run's budget and deadlines (calls.py). Never raises: every fault
    comes back as a Reply with `error`."""
    probes, failure = 0, ""
    json_schema = compact_schema(schema)
    capped = models.capped(model, max_tokens(role, items))
    limit = reply_chars(role, items)
    for method in _methods_to_try(models, model, settings):
        runnable: Any
        try:
            runnable = capped if method == "prompt" else _request_only(
                capped.with_structured_output(json_schema, method=method))
        except (NotImplementedError, ValueError, TypeError) as exc:  # this model class has no such method
            failure = describe(exc)
            continue
        config: Any = NOT_STREAMED
        asked = conversations if method in ("json_schema", "function_calling") else [
            _with_schema(messages, json_schema) for messages in conversations]  # fmt: skip
        outcomes = call_all(runnable, asked, settings, config)
        if all(o.error is not None and _rejected_method(o.error) for o in outcomes):
            probes += sum(o.calls for o in outcomes)
            failure = outcomes[0].reason
            continue
        if any(o.error is None for o in outcomes):  # a timeout or a spent budget says nothing about the method
            models.remember(model, method)
        replies = [_reply(schema, o, sent, limit) for o, sent in zip(outcomes, asked, strict=True)]
        replies[0].calls += probes
        return replies
    error = f"no structured-output method worked: {failure}"
    return [Reply(None, calls=probes if i == 0 else 0, error=error) for i in range(len(conversations))]


def compact_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema with nested models inlined and without titles, defaults and nested descriptions: the same
    constraints in fewer prompt tokens. The root keeps its title and description, which name the schema or tool."""
    full = schema.model_json_schema()
    defs = full.pop("$defs", {})

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return strip(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: strip(v) for k, v in node.items()
                    if not (k in ("title", "default", "description") and not isinstance(v, dict))}  # fmt: skip
        return [strip(v) for v in node] if isinstance(node, list) else node

    return {"title": full["title"], "description": full.get("description", ""), **strip(full)}


def _with_schema(messages: list[BaseMessage], json_schema: dict[str, Any]) -> list[BaseMessage]:
    """The conversation with the reply format in its system prompt, for methods whose request carries none."""
    shape = "Reply with JSON only, matching this JSON schema: " + json.dumps(json_schema, separators=(",", ":"))
    if messages and isinstance(messages[0], SystemMessage):
        return [SystemMessage(f"{text_of(messages[0])}\n{shape}"), *messages[1:]]
    return [SystemMessage(shape), *messages]


def _methods_to_try(models: ChatModels, model: BaseChatModel, settings: Context) -> Sequence[str]:
    if settings.structured_output != "auto":
        return (settings.structured_output,)
    known = models.method_for(model)
    return (known,) if known else METHODS


def _request_only(structured: Any) -> Any:
    """The model bound to ask for the structure, without LangChain's parser after it: that parser retries a
    failing parse one character shorter at a time, for minutes on a megabyte reply. Every provider's
    `with_structured_output` is `model.bind(...) | parser`; we parse the raw message ourselves (`_reply`)."""
    first = getattr(structured, "first", None)
    if first is None:  # some other shape: cannot be taken apart, so no structured request of this method
        raise MethodUnavailable(f"cannot separate {type(structured).__name__} from its parser")
    return first


def _rejected_method(error: BaseException) -> bool:
    return isinstance(error, NotImplementedError) or status_of(error) in (400, 422)


def _reply(schema: type[T], outcome: Outcome, conversation: list[BaseMessage], limit: int) -> Reply[T]:
    if outcome.error is not None:
        return Reply(None, calls=outcome.calls, error=outcome.reason)
    raw = outcome.output
    tokens = usage_tokens(raw, conversation)
    if (size := reply_size(raw)) > limit:  # a runaway reply: not worth parsing, whatever the client made of it
        return Reply(None, calls=outcome.calls, tokens=tokens,
                     error=f"malformed reply: {size} characters, more than the {limit} this call allows")
    try:
        for candidate in _candidates(raw, limit):
            try:
                return Reply(schema.model_validate(_fit(schema, candidate)), calls=outcome.calls, tokens=tokens)
            except (ValidationError, TypeError, ValueError):
                continue
    except Exception as exc:  # contained: no reply, however odd, may take the component down
        return Reply(None, calls=outcome.calls, tokens=tokens, error=f"malformed reply: {describe(exc)}")
    shown = " ".join((text_of(raw)[:400] or str(getattr(raw, "tool_calls", ""))[:400])[:160].split())
    return Reply(None, calls=outcome.calls, tokens=tokens, error=f"malformed reply: {shown!r}")


def reply_size(message: Any) -> int:
    """Characters of a reply: its text and its tool calls' arguments."""
    size = len(text_of(message))
    for key in ("tool_calls", "invalid_tool_calls"):
        for call in getattr(message, key, None) or []:
            size += len(str(call.get("args") or ""))
    return size


def _candidates(raw: Any, limit: int) -> Iterator[Any]:
    """What the reply may hold, best first: tool-call arguments (the client parsed them), then the text,
    leniently. Lazily: the lenient parse runs only when the better candidates did not validate."""
    for call in getattr(raw, "tool_calls", None) or []:
        yield call.get("args")
    texts = [str(call.get("args") or "") for call in getattr(raw, "invalid_tool_calls", None) or []]
    for text in [*texts, text_of(raw)]:
        with suppress(ValueError):  # not every place holds JSON
            yield loads_lenient(text, limit)


def _fit(schema: type[BaseModel], data: Any) -> Any:
    """Small models often reply with the bare list, or wrap the object in the schema's name: accept both."""
    if isinstance(data, dict) and len(data) == 1 and schema.__name__ in data:
        data = data[schema.__name__]
    lists = [name for name, f in schema.model_fields.items() if getattr(f.annotation, "__origin__", None) is list]
    if isinstance(data, list) and len(schema.model_fields) == 1 and lists:
        return {lists[0]: data}
    return data


# --- text --------------------------------------------------------------------------------------------------------

_TRAILING_COMMA = re.compile(r",\s*([}\]])")
MAX_DEPTH = 32  # deeper JSON is no reply of ours; refusing it keeps json and ast clear of their recursion limits
MAX_SPANS = 8  # bracketed spans tried per reply: a prose reply with many brackets costs no more than a few
_OPEN, _CLOSE = "{[", "}]"


def loads_lenient(text: str, limit: int = 100_000) -> Any:
    """JSON from a reply that wraps it in prose or a code fence, follows it with text, ends objects with trailing
    commas, or writes Python literals (single quotes, True/None). Raises ValueError when there is none, or when
    the reply is longer than `limit` characters.

    Linear in the reply: one pass finds the top-level bracketed spans (strings and escapes respected), and each
    of the first few is decoded on its own; a span nested deeper than MAX_DEPTH is skipped, never parsed."""
    text = text or ""
    if len(text) > limit:
        raise ValueError(f"the reply is {len(text)} characters, more than the {limit} allowed")
    for span in _spans(text):
        for fixed in (span, _TRAILING_COMMA.sub(r"\1", span)):
            try:
                value = json.loads(fixed)
            except Exception:  # noqa: BLE001 - not JSON as it stands; whatever json says, it is contained here
                try:
                    value = ast.literal_eval(fixed)
                except Exception:  # noqa: BLE001 - nor a Python literal
                    continue
            if isinstance(value, (dict, list)):
                return value
    raise ValueError("no JSON object in the reply")


def _spans(text: str) -> Iterator[str]:
    """The top-level {...} and [...] spans of `text`, in order, at most MAX_SPANS, none deeper than MAX_DEPTH.
    Quotes only count inside a span, so an apostrophe in the prose around it ("I'm") changes nothing. A bracket
    that never closes ("see [1") would hide what follows it: the scan restarts after it, at most MAX_SPANS
    times, so the whole stays linear."""
    tried, pos = 0, 0
    while tried < MAX_SPANS and pos < len(text):
        depth = 0
        start, quote, escaped, too_deep = -1, "", False, False
        for i in range(pos, len(text)):
            char = text[i]
            if depth and quote:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == quote:
                    quote = ""
            elif depth and char in "\"'":
                quote = char
            elif char in _OPEN:
                if not depth:
                    start, too_deep = i, False
                depth += 1
                too_deep = too_deep or depth > MAX_DEPTH
            elif char in _CLOSE and depth:
                depth -= 1
                if not depth:
                    if not too_deep:
                        yield text[start : i + 1]
                    tried += 1
                    if tried >= MAX_SPANS:
                        return
        if not depth:
            return
        tried, pos = tried + 1, start + 1  # an unclosed span: look again just after its opening bracket


def text_of(message: Any) -> str:
    """The text of a message whose content is a string or a list of content blocks."""
    content = getattr(message, "content", message)
    if isinstance(content, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content or "")


def usage_tokens(message: Any, prompt: list[BaseMessage]) -> int:
    """Prompt + completion tokens as the server reported them, else estimated with tiktoken."""
    usage = getattr(message, "usage_metadata", None)
    if usage and usage.get("total_tokens"):
        return int(usage["total_tokens"])
    reply = text_of(message) + "".join(json.dumps(c.get("args")) for c in getattr(message, "tool_calls", None) or [])
    return sum(count_tokens(text_of(m)) for m in prompt) + _count(reply)


def _count(text: str) -> int:
    """tiktoken's count; for a runaway reply an estimate (tiktoken is slow on megabytes without spaces)."""
    return count_tokens(text) if len(text) <= 50_000 else len(text) // 4
