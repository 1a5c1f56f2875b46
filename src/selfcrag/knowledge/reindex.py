"""`selfcrag reindex DIR`: rebuild an index's derived files from its stored chunks, without embedding anything.

The keyword index is derived: each chunk's search text (`retrieval.index_text`) cut by the current tokenisation.
So an index saved by an older selfcrag (format 1: `bm25.npz` or `bm25.json`), one whose keyword index is damaged
or missing, or one built with an older tokenizer, gets a new `keywords/` and a manifest naming the current format
and tokenizer; its vectors, chunks, stored text vectors and document hashes are carried over as they are (hard
links where the filesystem allows: nothing is copied or re-embedded). The save is atomic like every save
(atomic_dir): a reindex that fails or is stopped leaves the old index whole.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from selfcrag.errors import DamagedFile, IngestError
from selfcrag.knowledge import index_files
from selfcrag.knowledge.atomic_dir import reading, replace_directory
from selfcrag.knowledge.documents import Chunk
from selfcrag.knowledge.keywords import Keywords
from selfcrag.knowledge.retrieval import FORMAT_VERSION, REINDEXED, index_text, require_index
from selfcrag.text.text import TOKENIZER, keyword_tokens

# Derived files reindex writes anew (or drops): everything else in the directory is carried over.
DERIVED = (index_files.KEYWORD_DIR, index_files.KEYWORDS, index_files.LEGACY_KEYWORDS, index_files.MANIFEST)


@dataclass
class ReindexReport:
    index_dir: str
    chunks: int
    from_format: int
    seconds: float

    def summary(self) -> str:
        return (f"rebuilt the keyword index of {self.chunks} chunks in {self.index_dir} from its stored chunks in "
                f"{self.seconds:.1f}s (format {self.from_format} -> {FORMAT_VERSION}; nothing embedded)")


def reindex(directory: str | Path) -> ReindexReport:
    started = time.monotonic()
    path = require_index(directory)
    with reading(path):
        try:
            manifest = index_files.read_manifest(path)
            count = manifest["chunks"]
            records = index_files.read_chunks(path, count)
        except DamagedFile as exc:
            raise IngestError(f"index at {directory} is damaged beyond its keywords: {exc}; rebuild it with "
                              f"`selfcrag ingest PATH --index {directory}`") from None
    version = manifest["format_version"]
    if version not in (*REINDEXED, FORMAT_VERSION):
        raise IngestError(f"index at {directory} has format {version!r}, which this selfcrag cannot convert; rebuild "
                          f"it with `selfcrag ingest PATH --index {directory}`")
    documents = [keyword_tokens(index_text(Chunk(**record))) for record in records]

    def write(tmp: Path) -> None:
        for entry in path.iterdir():
            if entry.name not in DERIVED and entry.is_file():
                _carry(entry, tmp / entry.name)
        Keywords.build(documents, tmp / index_files.KEYWORD_DIR)
        index_files.write_manifest(tmp, {**manifest, "format_version": FORMAT_VERSION, "tokenizer": TOKENIZER})

    replace_directory(path, write)
    return ReindexReport(str(directory), count, version, time.monotonic() - started)


def _carry(source: Path, target: Path) -> None:
    """A file of the old index into the new: a hard link (files of an index are replaced whole, never edited), or a
    copy where links are refused (another filesystem, FAT)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
