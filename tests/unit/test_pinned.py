"""The sha256 pin of the model files, remembered between starts (knowledge/pinned.py): a file that matched is not
hashed again while its identity on disk is the same, and a changed file is hashed and refused however it was
changed (same size, mtime set back)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from selfcrag.errors import EmbeddingModelError
from selfcrag.knowledge import pinned

CONTENT = b"model weights " * 1000


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    monkeypatch.setenv("SELFCRAG_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "model.onnx"
    path.write_bytes(CONTENT)
    return path, hashlib.sha256(CONTENT).hexdigest()


def later(monkeypatch: pytest.MonkeyPatch, seconds: float = 10.0) -> None:
    """The clock some seconds on: the file was not written within RECENT_S of being hashed."""
    now = time.time_ns()
    monkeypatch.setattr(pinned.time, "time_ns", lambda: now + int(seconds * 1e9))


def hashes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the files `pinned` hashes (its reads of a whole file)."""
    reads: list[int] = []
    real = Path.read_bytes

    def counted(self: Path) -> bytes:
        reads.append(1)
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    return reads


def test_a_matched_file_is_not_hashed_again(model: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    path, digest = model
    later(monkeypatch)
    reads = hashes(monkeypatch)
    assert pinned.verified(path, digest) == path
    assert pinned.verified(path, digest) == path
    assert len(reads) == 1
    entry = json.loads((Path(os.environ["SELFCRAG_CACHE_DIR"]) / pinned.CACHE_FILE).read_text())[str(path.resolve())]
    assert entry[-1] == digest


def test_a_file_changed_to_the_same_size_and_mtime_is_refused(model: tuple[Path, str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path, digest = model
    later(monkeypatch)
    pinned.verified(path, digest)  # remembered
    before = path.stat()
    time.sleep(0.01)  # past the filesystem's timestamp tick, so the write gives a new ctime
    path.write_bytes(CONTENT.replace(b"weights", b"WEIGHTS"))  # same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime set back: only ctime tells
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    with pytest.raises(EmbeddingModelError, match="expected"):
        pinned.verified(path, digest)


def test_a_file_replaced_by_another_is_refused(model: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    path, digest = model
    later(monkeypatch)
    pinned.verified(path, digest)
    other = path.with_name("other.onnx")
    other.write_bytes(CONTENT[::-1])
    os.replace(other, path)
    with pytest.raises(EmbeddingModelError, match="expected"):
        pinned.verified(path, digest)


def test_an_entry_for_another_pin_is_not_taken(model: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A new release pins another digest: the remembered match was for the old one, so the file is hashed."""
    path, digest = model
    later(monkeypatch)
    pinned.verified(path, digest)
    with pytest.raises(EmbeddingModelError, match="expected"):
        pinned.verified(path, "0" * 64)


def test_a_file_written_just_now_is_not_remembered(model: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Within a timestamp tick a second write could keep the identity the first was hashed with."""
    path, digest = model
    reads = hashes(monkeypatch)
    pinned.verified(path, digest)
    pinned.verified(path, digest)
    assert len(reads) == 2
    assert not (Path(os.environ["SELFCRAG_CACHE_DIR"]) / pinned.CACHE_FILE).exists()


def test_a_damaged_cache_file_means_hashing(model: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    path, digest = model
    later(monkeypatch)
    cache = Path(os.environ["SELFCRAG_CACHE_DIR"])
    cache.mkdir(parents=True)
    (cache / pinned.CACHE_FILE).write_text("{not json")
    reads = hashes(monkeypatch)
    assert pinned.verified(path, digest) == path
    assert len(reads) == 1
    assert pinned.verified(path, digest) == path  # rewritten whole: remembered now
    assert len(reads) == 1


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingModelError, match="not found"):
        pinned.verified(tmp_path / "absent.onnx", "0" * 64)
