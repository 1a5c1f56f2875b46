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
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar

from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.constants import TAG_NOSTREAM
from pydantic import BaseModel, BeforeValidator, ValidationError

from selfcrag.components.llm.faults import describe, raise_if_retrying
from selfcrag.prompts.tokens import count_tokens

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from selfcrag.components.llm.models import ChatModels
    from selfcrag.context import Context

METHODS = ("json_schema", "function_calling", "json_mode", "prompt")
T = TypeVar("T", bound=BaseModel)


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


def ask(models: ChatModels, model: BaseChatModel, schema: type[T], messages: list[BaseMessage],
        settings: Context) -> Reply[T]:  # fmt: skip
    return ask_many(models, model, schema, [messages], settings)[0]


def ask_many(models: ChatModels, model: BaseChatModel, schema: type[T], conversations: list[list[BaseMessage]],
             settings: Context) -> list[Reply[T]]:  # fmt: skip
    """One structured call per conversation, all at once (`Runnable.batch` runs them concurrently). Raises only a
    transient fault that the node will retry; every other fault comes back as a Reply with `error`."""
    probes, failure = 0, ""
    json_schema = compact_schema(schema)
    for method in _methods_to_try(models, model, settings):
        runnable: Any
        try:
            runnable = model if method == "prompt" else model.with_structured_output(
                json_schema, method=method, include_raw=True
            )
        except (NotImplementedError, ValueError, TypeError) as exc:  # this model class has no such method
            failure = describe(exc)
            continue
        # Grader calls are not part of the answer: keep them out of stream_mode="messages".
        config: Any = {"tags": [TAG_NOSTREAM], "max_concurrency": len(conversations)}
        asked = conversations if method in ("json_schema", "function_calling") else [
            _with_schema(messages, json_schema) for messages in conversations]  # fmt: skip
        outs = runnable.batch(asked, config=config, return_exceptions=True)
        if all(_rejected_method(out) for out in outs):
            probes += len(outs)
            failure = describe(outs[0])
            continue
        models.remember(model, method)
        replies = [_reply(schema, out, method, sent) for out, sent in zip(outs, asked, strict=True)]
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


def _rejected_method(out: Any) -> bool:
    return isinstance(out, NotImplementedError) or (
        isinstance(out, Exception) and getattr(out, "status_code", None) in (400, 422)
    )


def _reply(schema: type[T], out: Any, method: str, conversation: list[BaseMessage]) -> Reply[T]:
    if isinstance(out, Exception):
        raise_if_retrying(out)
        return Reply(None, calls=1, error=describe(out))
    raw = out if method == "prompt" else out["raw"]
    parsed = None if method == "prompt" else out.get("parsed")
    tokens = usage_tokens(raw, conversation)
    for candidate in _candidates(parsed, raw):
        try:
            return Reply(schema.model_validate(_fit(schema, candidate)), calls=1, tokens=tokens)
        except (ValidationError, TypeError, ValueError):
            continue
    shown = " ".join((text_of(raw) or str(getattr(raw, "tool_calls", "")))[:160].split())
    return Reply(None, calls=1, tokens=tokens, error=f"malformed reply: {shown!r}")


def _candidates(parsed: Any, raw: Any) -> list[Any]:
    """What the reply may hold, best first: the client's parse, tool-call arguments, then the text, leniently."""
    found = [parsed] if parsed is not None else []
    for call in getattr(raw, "tool_calls", None) or []:
        found.append(call.get("args"))
    texts = [str(call.get("args") or "") for call in getattr(raw, "invalid_tool_calls", None) or []]
    for text in [*texts, text_of(raw)]:
        with suppress(ValueError):  # not every place holds JSON
            found.append(loads_lenient(text))
    return found


def _fit(schema: type[BaseModel], data: Any) -> Any:
    """Small models often reply with the bare list, or wrap the object in the schema's name: accept both."""
    if isinstance(data, dict) and len(data) == 1 and schema.__name__ in data:
        data = data[schema.__name__]
    lists = [name for name, f in schema.model_fields.items() if getattr(f.annotation, "__origin__", None) is list]
    if isinstance(data, list) and len(schema.model_fields) == 1 and lists:
        return {lists[0]: data}
    return data


# --- text --------------------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def loads_lenient(text: str) -> Any:
    """JSON from a reply that wraps it in prose or a code fence, ends objects with trailing commas, or writes
    Python literals (single quotes, True/None). Raises ValueError when there is none."""
    text = (text or "").strip()
    candidates = [text, *_FENCE.findall(text)]
    for open_, close in ("{}", "[]"):
        start, end = text.find(open_), text.rfind(close)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        for fixed in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            try:
                return json.loads(fixed)
            except json.JSONDecodeError:
                pass
            try:
                value = ast.literal_eval(fixed)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(value, (dict, list)):
                return value
    raise ValueError("no JSON object in the reply")


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
    return sum(count_tokens(text_of(m)) for m in prompt) + count_tokens(reply)
