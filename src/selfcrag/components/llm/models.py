"""The chat models of the model backend: the objects a caller passes in, else built from the run's settings
("provider:model", e.g. `openai:gpt-4o-mini`) and cached per process.

OpenAI and every OpenAI-compatible server (vLLM, Ollama, llama.cpp server, LM Studio) go through
`langchain_openai.ChatOpenAI`; other providers through LangChain's `init_chat_model`.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from selfcrag.components.llm.faults import ModelConfigError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from selfcrag.context import Context


def model_configured() -> bool:
    """A model is reachable without further setup: the `auto` backend then uses it."""
    return any(os.environ.get(name) for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SELFCRAG_BASE_URL"))


def chat_model(spec: str, *, temperature: float, timeout: float, base_url: str = "") -> BaseChatModel:
    """A chat model for "provider:model" (a bare name means OpenAI). Retries are the graph's (RetryPolicy), so
    the client's own are off; usage is requested on streams too, so tokens are counted either way."""
    provider, _, name = spec.partition(":") if ":" in spec else ("openai", "", spec)
    if not name:
        raise ModelConfigError(f"model {spec!r} names no model: use provider:model, e.g. openai:gpt-4o-mini")
    if provider == "openai":
        from langchain_openai import ChatOpenAI
        from pydantic import SecretStr

        url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = os.environ.get("OPENAI_API_KEY") or ("not-needed" if url else None)  # local servers need no key
        if key is None:
            raise ModelConfigError(f"model {spec!r} needs OPENAI_API_KEY, or OPENAI_BASE_URL for a compatible server")
        return ChatOpenAI(model=name, temperature=temperature, timeout=timeout, max_retries=0, base_url=url,
                          api_key=SecretStr(key), stream_usage=True)  # fmt: skip
    try:
        from langchain.chat_models import init_chat_model  # type: ignore[import-not-found]
    except ImportError:
        try:
            from langchain_classic.chat_models import init_chat_model
        except ImportError as exc:
            raise ModelConfigError(f"provider {provider!r} needs `pip install langchain langchain-{provider}`") from exc
    try:
        return init_chat_model(name, model_provider=provider, temperature=temperature, timeout=timeout, max_retries=0)
    except (ImportError, ValueError) as exc:
        raise ModelConfigError(f"cannot build model {spec!r}: {exc}") from exc


class ChatModels:
    """Which model plays which role in a run. Objects passed in win over settings: the grader is `grader_llm`,
    else `grader_model` (when set), else the generator's model. Also remembers, per model, which structured-
    output method its server accepted, so only the first call pays for finding out."""

    def __init__(self, llm: BaseChatModel | None = None, grader_llm: BaseChatModel | None = None) -> None:
        self.llm = llm
        self.grader_llm = grader_llm
        self._built: dict[tuple[Any, ...], BaseChatModel] = {}
        self._methods: dict[int, str] = {}
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
        key = (spec, temperature, settings.llm_timeout, settings.base_url, os.environ.get("OPENAI_BASE_URL"))
        with self._lock:
            if key not in self._built:
                self._built[key] = chat_model(spec, temperature=temperature, timeout=settings.llm_timeout,
                                              base_url=settings.base_url)  # fmt: skip
            return self._built[key]

    def method_for(self, model: BaseChatModel) -> str | None:
        return self._methods.get(id(model))  # the models live as long as this object: ids stay unique

    def remember(self, model: BaseChatModel, method: str) -> None:
        self._methods[id(model)] = method
