"""The chat models of the model backend: the objects a caller passes in, else built from the run's settings
("provider:model", e.g. `openai:gpt-4o-mini`) and cached per process.

OpenAI and every OpenAI-compatible server (vLLM, Ollama, llama.cpp server, LM Studio) go through
`langchain_openai.ChatOpenAI`; other providers through LangChain's `init_chat_model`.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from selfcrag.endpoints import api_key_for
from selfcrag.errors import ModelConfigError
from selfcrag.text.redaction import redact

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from selfcrag.context import Context


def chat_model(spec: str, *, temperature: float, timeout: float, base_url: str = "") -> BaseChatModel:
    """A chat model for "provider:model" (a bare name means OpenAI). Retries are ours (llm/calls.py),
    so the client's own are off; usage is requested on streams too, so tokens are counted either way."""
    provider, _, name = spec.partition(":") if ":" in spec else ("openai", "", spec)
    if not name:
        raise ModelConfigError(f"model {spec!r} names no model: use provider:model, e.g. openai:gpt-4o-mini")
    if provider == "openai":
        from langchain_openai import ChatOpenAI
        from pydantic import SecretStr

        # Name the endpoint explicitly, so the key decided below is the key for where the requests go.
        url = base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or None
        key = api_key_for(url)
        if key is None:
            raise ModelConfigError(f"model {spec!r} needs OPENAI_API_KEY, or OPENAI_BASE_URL for a compatible server")
        return ChatOpenAI(model=name, temperature=temperature, timeout=timeout, max_retries=0, base_url=url,
                          api_key=SecretStr(key), stream_usage=True)  # fmt: skip
    try:
        from langchain.chat_models import init_chat_model
    except ImportError:
        try:
            from langchain_classic.chat_models import init_chat_model
        except ImportError as exc:
            raise ModelConfigError(f"provider {provider!r} needs `pip install langchain langchain-{provider}`") from exc
    try:
        model: BaseChatModel = init_chat_model(name, model_provider=provider, temperature=temperature, timeout=timeout,
                                               max_retries=0)  # fmt: skip
        return model
    except (ImportError, ValueError) as exc:
        raise ModelConfigError(f"cannot build model {spec!r}: {redact(str(exc))}") from exc


class ChatModels:
    """Which model plays which role in a run. Objects passed in win over settings: the grader is `grader_llm`,
    else `grader_model` (when set), else the generator's model. Also remembers, per model, which structured-
    output method its server accepted, so only the first call pays for finding out."""

    def __init__(self, llm: BaseChatModel | None = None, grader_llm: BaseChatModel | None = None) -> None:
        self.llm = llm
        self.grader_llm = grader_llm
        self._built: dict[tuple[Any, ...], BaseChatModel] = {}
        self._methods: dict[int, str] = {}
        self._capped: dict[tuple[int, int], BaseChatModel] = {}
        self._lock = threading.Lock()

    def generator(self, settings: Context) -> BaseChatModel:
        return self.llm or self._build(settings.generator_model, settings.temperature, settings)

    def grader(self, settings: Context) -> BaseChatModel:
        if self.grader_llm is not None:
            return self.grader_llm
        if settings.grader_model:
            return self._build(settings.grader_model, 0.0, settings)
        return self.llm or self._build(settings.generator_model, 0.0, settings)

    def _build(self, spec: str, temperature: float, settings: Context) -> BaseChatModel:
        # The endpoint and the keys come from the environment at build time: a change there is a new model.
        env = tuple(os.environ.get(n) for n in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_KEY",
                                                 "SELFCRAG_API_KEY"))  # fmt: skip
        key = (spec, temperature, settings.llm_timeout, settings.base_url, env)
        with self._lock:
            if key not in self._built:
                self._built[key] = chat_model(spec, temperature=temperature, timeout=settings.llm_timeout,
                                              base_url=settings.base_url)  # fmt: skip
            return self._built[key]

    def capped(self, model: BaseChatModel, max_tokens: int) -> BaseChatModel:
        """The model with its completion capped at `max_tokens` (one copy per model and cap)."""
        key = (id(model), max_tokens)
        with self._lock:
            if key not in self._capped:
                self._capped[key] = with_max_tokens(model, max_tokens)
            return self._capped[key]

    def method_for(self, model: BaseChatModel) -> str | None:
        return self._methods.get(id(model))  # the models live as long as this object: ids stay unique

    def remember(self, model: BaseChatModel, method: str) -> None:
        self._methods[id(model)] = method


# Where LangChain chat models keep their completion cap: OpenAI and Anthropic, Google, Ollama, Hugging Face.
_MAX_TOKEN_FIELDS = ("max_tokens", "max_output_tokens", "num_predict", "max_new_tokens")


def copied(model: BaseChatModel, **update: Any) -> BaseChatModel:
    """A copy of `model` with `update` set. LangChain caches a model's serialised form (`_serialized`, a
    cached_property) and `model_copy` copies that cache along: the copy would describe itself, in the model cache's
    key (llm/replay.py), without the fields just set (logprobs, logit_bias, max_tokens). The copy forgets it."""
    made = model.model_copy(update=update)
    made.__dict__.pop("_serialized", None)
    return made


def with_max_tokens(model: BaseChatModel, max_tokens: int) -> BaseChatModel:
    """A copy of `model` whose replies stop at `max_tokens`, when it has a known field for that; a cap the caller
    set lower stays. A copy, not `bind(max_tokens=...)`: binding is lost by `with_structured_output`, and a
    model class that has no such field might pass an unknown argument on to its API. A model without one is
    used as it is (its replies are still cut to a size before parsing)."""
    fields = getattr(type(model), "model_fields", {})
    for name in _MAX_TOKEN_FIELDS:
        if name in fields:
            current = getattr(model, name, None)
            if isinstance(current, int) and 0 < current <= max_tokens:
                return model
            return copied(model, **{name: max_tokens})
    return model
