"""The embedding model's onnxruntime session, started from an optimized copy of the model kept in the cache.

onnxruntime optimizes a graph as it opens it; for the int8 MiniLM that is mostly folding each int8 weight and its
DequantizeLinear into a float32 constant (the 23 MB file becomes 90 MB of weights), and it cost ~0.25 CPU-s of
every start here, the largest part of a cold `selfcrag ask`. Opening without optimizing took 0.06 s, but the
model then ran 14-35% slower (a 30-call test here; 45% in an earlier measurement). So the first start saves the
optimized graph (`optimized_model_filepath`) with its weights in a file of their own beside it, and later starts
open that with optimizations off: onnxruntime maps the weights file instead of building it (~0.08 CPU-s here), and
the vectors are bit-identical to the ones the source model gives (tests/unit/test_onnx_session.py compares them).

The copy lives in `<cache>/onnx-<key>/`, keyed by the source model's pinned sha256, onnxruntime's version and the
machine's architecture (an optimized graph may hold kernels of this build and CPU); its `manifest.json` holds the
sha256 of both files, checked at every start (by `pinned.verified`, so a file is hashed only when it changed).
A copy that is missing, changed or does not open is rebuilt from the source model; a cache that cannot be written
means the source is optimized at every start, as before. The source model's own pin is checked first either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selfcrag.errors import EmbeddingModelError
from selfcrag.home import cache_dir
from selfcrag.knowledge.pinned import verified

FORMAT = 1  # of the cached copy; a new one is written beside older ones, never over them
GRAPH = "model.onnx"
WEIGHTS = "weights.bin"
MANIFEST = "manifest.json"


def copy_dir(source_sha256: str) -> Path:
    import onnxruntime as ort

    key = hashlib.sha256(f"{source_sha256}\0{ort.__version__}\0{platform.machine()}\0{FORMAT}".encode()).hexdigest()
    return cache_dir() / f"onnx-{key[:16]}"


def _open_copy(folder: Path, source_sha256: str, options: Any) -> Any:
    """The session from the cached copy in `folder`, or None when there is none that checks out."""
    import onnxruntime as ort

    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("source_sha256") != source_sha256:
            return None
        for name in (GRAPH, WEIGHTS):
            verified(folder / name, manifest["files"][name])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EmbeddingModelError):
        return None
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # done when it was saved
    try:
        return ort.InferenceSession(str(folder / GRAPH), options, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - onnxruntime's errors (Fail, InvalidGraph, ...) derive from Exception alone
        return None


def _digest(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _save_copy(source: Path, source_sha256: str, folder: Path, options: Any) -> Any:
    """A session optimized from `source` that also writes the optimized copy, swapped in as `folder` whole; None
    when the copy cannot be written (the caller opens the source without it)."""
    part = folder.with_name(f".{folder.name}.{os.getpid()}.part")
    try:
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        options.optimized_model_filepath = str(part / GRAPH)
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name", WEIGHTS)
        options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        import onnxruntime as ort

        session = ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        files = {name: _digest(part / name) for name in (GRAPH, WEIGHTS)}
        (part / MANIFEST).write_text(json.dumps({"source_sha256": source_sha256, "onnxruntime": ort.__version__,
                                                 "machine": platform.machine(), "files": files}, indent=1),
                                     encoding="utf-8")  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)  # a copy that did not check out
        with contextlib.suppress(OSError):  # another process's copy got there first: it is the same
            os.replace(part, folder)
        return session
    except Exception:  # noqa: BLE001 - a disk that fills, or any of onnxruntime's errors (they derive from Exception)
        return None
    finally:
        shutil.rmtree(part, ignore_errors=True)


def model_session(source: Path, source_sha256: str, options: Callable[[], Any]) -> Any:
    """The session for the model file `source` (refused unless its sha256 is `source_sha256`), opened with
    `options()` (made afresh per attempt: an attempt changes them)."""
    import onnxruntime as ort

    verified(source, source_sha256)
    folder = copy_dir(source_sha256)
    session = _open_copy(folder, source_sha256, options()) or _save_copy(source, source_sha256, folder, options())
    return session or ort.InferenceSession(str(source), options(), providers=["CPUExecutionProvider"])
