"""Saved indexes: `kill -9` in the middle of repeated saves, and each file of an index damaged as a disk or a hand
would (the files of knowledge/index_files.py and keywords.py's keywords/, and an index of the format before it)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from faults.core import Outcome, cases
from selfcrag.knowledge.index_files import CHUNKS, KEYWORD_DIR, KEYWORDS, MANIFEST, VECTORS

SAVER = textwrap.dedent("""
    import sys, itertools
    sys.path.insert(0, sys.argv[2])
    from faults.indexes import small_index
    target = sys.argv[1]
    a, b = small_index("old", 300), small_index("new", 300)
    a.save(target)
    print("ready", flush=True)
    for i in itertools.count():
        (b if i % 2 else a).save(target)
""")
_draw = random.Random(7)
KILL_POINTS = sorted(round(_draw.uniform(0.05, 1.5), 2) for _ in range(10))  # seconds after the first save
WORK = Path(tempfile.mkdtemp(prefix="selfcrag-faults-index-"))


class HashedWords:
    """A deterministic embedder (hashed word counts): an index saves and loads without the MiniLM model."""

    name = "fault-matrix/hashed-words"
    dim = 64

    def embed_documents(self, texts: list[str]) -> Any:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)

    def embed_query(self, text: str) -> Any:
        return self.embed_documents([text])[0]


def small_index(tag: str, documents: int) -> Any:
    from selfcrag.knowledge.documents import SourceDocument, chunk_documents
    from selfcrag.knowledge.retrieval import HybridIndex

    docs = [SourceDocument(f"{tag}-{i}", f"{tag} {i}", "matrix", f"Document {i} of the {tag} set. " * 20)
            for i in range(documents)]  # fmt: skip
    return HybridIndex.build(chunk_documents(docs), HashedWords())


def _kill_during_saves(outcome: Outcome, after: float) -> None:
    from selfcrag.knowledge.retrieval import HybridIndex

    target = WORK / f"kill-after-{after}"
    saver = subprocess.Popen([sys.executable, "-c", SAVER, str(target), str(Path(__file__).parents[1])],
                             stdout=subprocess.PIPE, text=True, env={**os.environ})  # fmt: skip
    assert saver.stdout is not None
    saver.stdout.readline()  # "ready": the first index is whole
    time.sleep(after)
    saver.send_signal(signal.SIGKILL)
    saver.wait()
    try:
        tags = {c.doc_id.split("-")[0] for c in HybridIndex.load(target, HashedWords()).chunks}
        outcome.flags["lost_indexes"] = tags not in ({"old"}, {"new"})
        outcome.note = f"loaded the {'/'.join(sorted(tags))} index"
    except Exception as exc:  # noqa: BLE001
        outcome.flags["lost_indexes"], outcome.note = True, f"{type(exc).__name__}: {exc}"[:120]


cases(
    "indexes",
    [f"kill -9 {after}s into repeated saves" for after in KILL_POINTS],
    _kill_during_saves,
    KILL_POINTS,
    fast={0, 9},
)


def _keyword_array(directory: Path, name: str, change: Callable[[np.ndarray], np.ndarray]) -> None:
    """Rewrite one of keywords/'s arrays with `change` applied (our own file, so np.load is safe here)."""
    path = directory / KEYWORD_DIR / f"{name}.npy"
    np.save(path, change(np.load(path)))


def _tantivy_meta(directory: Path) -> None:
    (directory / KEYWORD_DIR / "tantivy" / "meta.json").write_text("{")


def _older_format(directory: Path) -> None:
    """An index as selfcrag saved it before keywords/ (format 1, bm25.npz): refused with the command that
    converts it."""
    shutil.rmtree(directory / KEYWORD_DIR)
    (directory / KEYWORDS).write_bytes(b"")
    manifest = json.loads((directory / MANIFEST).read_text())
    (directory / MANIFEST).write_text(json.dumps({**manifest, "format_version": 1}))


def _cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


DAMAGES: dict[str, Callable[[Path], None]] = {
    "manifest not JSON": lambda d: (d / MANIFEST).write_text("{"),
    "vectors truncated": lambda d: _cut(d / VECTORS, 100),
    "vectors header claims 2 GB": lambda d: (d / VECTORS).write_bytes(
        (d / VECTORS).read_bytes()[:9] + (2**25).to_bytes(8, "little") + (d / VECTORS).read_bytes()[17:4600]
    ),
    "chunk with a wrong type": lambda d: (d / CHUNKS).write_text(
        (d / CHUNKS).read_text().replace('"chunk_index": 0', '"chunk_index": "zero"', 1)
    ),
    "chunks truncated": lambda d: _cut(d / CHUNKS, 500),
    "keywords description not JSON": lambda d: (d / KEYWORD_DIR / "keywords.json").write_text("[1, 2"),
    "keywords row out of range": lambda d: _keyword_array(d, "doc_rows", lambda a: np.full_like(a, 999_999)),
    "keywords postings truncated": lambda d: _cut(d / KEYWORD_DIR / "postings.npy",
                                                  (d / KEYWORD_DIR / "postings.npy").stat().st_size // 2),
    "an older index's keyword file (format 1)": _older_format,
    "keywords array of objects": lambda d: np.save(d / KEYWORD_DIR / "df.npy", np.array([{}], object),
                                                   allow_pickle=True),
    "keywords array missing": lambda d: (d / KEYWORD_DIR / "df.npy").unlink(),
    "keywords directory missing": lambda d: shutil.rmtree(d / KEYWORD_DIR),
    "tantivy index not readable": _tantivy_meta,
}


def _damaged(outcome: Outcome, name: str) -> None:
    """A damaged file gives one line naming it; a load that ignores the damage is counted as a crash too (the
    index would answer from a file nobody checked)."""
    from selfcrag.errors import IngestError
    from selfcrag.knowledge.retrieval import HybridIndex

    target = WORK / name.replace(" ", "-").replace("'", "")
    small_index("old", 20).save(target)
    DAMAGES[name](target)
    try:
        HybridIndex.load(target, HashedWords())
        outcome.flags["crashes"], outcome.note = True, "loaded: the damage went unnoticed"
    except IngestError as exc:
        outcome.flags["tracebacks"], outcome.note = "\n" in str(exc), str(exc).replace(str(target), "<index>")
    except Exception as exc:  # noqa: BLE001
        outcome.flags["crashes"], outcome.note = True, f"{type(exc).__name__}: {exc}"[:120]


cases("indexes", [f"damaged: {name}" for name in DAMAGES], _damaged, list(DAMAGES), fast={0, 2, 7, 8})
