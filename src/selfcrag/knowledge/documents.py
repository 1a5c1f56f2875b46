"""Documents in: read folders, files, JSONL corpora and LangChain Documents (reporting what was left out), and cut
them into chunks. Each file type's reader lives in loaders.py.

Kept apart from the index (retrieval.py) because reading is about the user's files and their faults, while the
index is about vectors, keywords and their persistence.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from selfcrag.contract import Passage
from selfcrag.errors import IngestError, Unreadable
from selfcrag.knowledge import folders, loaders
from selfcrag.knowledge.metadata_filter import parsed_metadata
from selfcrag.text.sanitize import clean_document
from selfcrag.text.text import approx_tokens, split_sentences

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # JSON's escape of a NUL, not an escaped backslash before "u0000"
_HEADING = re.compile(r"^#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)  # "# Title" or "# Title #"


@dataclass(frozen=True)
class SourceDocument:
    doc_id: str
    title: str
    source: str
    text: str
    # The JSON of the document's metadata (a LangChain Document's, a JSONL record's other fields, what the
    # VectorStore face was given: encoded_metadata), kept with each of its chunks, given back as it came and matched
    # by metadata filters (metadata_filter.py); "" for none (a file read from a folder, an index from before).
    metadata: str = ""
    # A file's: the name of the folder its id is relative to (the folder ingest was given, or a single file's
    # own), which qualifies the id when another source's document holds it already (clashes.py). Not stored.
    folder: str = ""


@dataclass(frozen=True)
class Chunk:
    id: str  # f"{doc_id}#{chunk_index}"
    doc_id: str
    chunk_index: int
    title: str
    source: str
    text: str
    metadata: str = ""  # its document's (SourceDocument.metadata)

    def to_passage(self, score: float) -> Passage:
        return Passage(
            id=self.id, doc_id=self.doc_id, chunk_index=self.chunk_index, title=self.title,
            source=self.source, text=self.text, score=score, origin="kb",
        )


# --- loading ----------------------------------------------------------------------------------------


def encoded_metadata(doc_id: str, metadata: dict[str, Any]) -> str:
    """A document's metadata as stored (JSON, "" for none), or an IngestError naming the document: it must be JSON
    without NUL characters (PostgreSQL's JSONB, which metadata filters search, refuses them)."""
    if not metadata:
        return ""
    try:
        encoded = json.dumps(metadata, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise IngestError(f"document {doc_id!r}: its metadata must be JSON ({exc})") from None
    if _NUL.search(encoded):
        raise IngestError(f"document {doc_id!r}: its metadata holds a NUL character")
    return encoded


def with_metadata(docs: list[SourceDocument], metadata: dict[str, Any]) -> list[SourceDocument]:
    """`docs`, each with `metadata`'s keys over its own (`ingest(..., metadata=...)`)."""
    return [replace(doc, metadata=encoded_metadata(doc.doc_id, {**parsed_metadata(doc.metadata), **metadata}))
            for doc in docs]


def cleaned(doc: SourceDocument) -> SourceDocument:
    """Stored and answered text is cleaned as questions are: no invisible characters, no look-alike letters inside
    Latin words; and, whatever the file type, no text its reader never sees (comments, image alt text, invisible
    runs: sanitize.clean_document)."""
    return replace(doc, title=clean_document(doc.title), text=clean_document(doc.text))


def _title(text: str, stem: str) -> str:
    heading = _HEADING.search(text)
    return heading.group(1) if heading else re.sub(r"[_-]+", " ", stem).strip() or stem


@dataclass(frozen=True)
class Skipped:
    """An input ingest left out: a JSONL record (`line` > 0), a whole file or a Document, and why."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}" if self.line else f"{self.file}: {self.reason}"


@dataclass
class LoadedDocuments:
    documents: list[SourceDocument]
    skipped: list[Skipped]


class _Collector:
    """Documents in input order, with what was skipped; `strict` turns the first skip into the error."""

    def __init__(self, strict: bool, limits: loaders.Limits) -> None:
        self.strict = strict
        self.limits = limits
        self.documents: list[SourceDocument] = []
        self.skipped: list[Skipped] = []
        self._owners: dict[str, tuple[str, int]] = {}  # doc id -> the file and line it came from

    def skip(self, file: Path | str, line: int, reason: str) -> None:
        problem = Skipped(str(file), line, reason)
        if self.strict:
            raise IngestError(str(problem))
        self.skipped.append(problem)

    def add(self, doc: SourceDocument, file: Path | str, line: int = 0) -> None:
        doc = cleaned(doc)
        # Chunk ids derive from doc ids, so two documents must not share one; the first keeps it.
        if doc.doc_id in self._owners:
            first_file, first_line = self._owners[doc.doc_id]
            first = (f"line {first_line}" if first_file == str(file) else
                     f"{first_file}:{first_line}" if first_line else first_file)
            self.skip(file, line, f"duplicate id {doc.doc_id!r} (first on {first})")
            return
        self._owners[doc.doc_id] = (str(file), line)
        self.documents.append(doc)

    def file(self, path: Path, doc_id: str, source: str, folder: str) -> None:
        try:
            parts = loaders.read_file(path, self.limits)
        except Unreadable as exc:
            self.skip(path, 0, str(exc))
            return
        if not any(part.text.strip() for part in parts):  # a folder's empty file is said, not dropped silently
            self.skip(path, 0, "no text to index")
            return
        for part in parts:
            if part.text.strip():
                title = part.title or _title(part.text, path.stem)
                part_id = f"{doc_id}/{part.key}" if part.key else doc_id
                # A page is named in the source as a PDF viewer opens it (RFC 8118), so every index keeps it and
                # every citation shows it: "manual.pdf#page=2".
                where = f"{source}#page={part.page}" if part.page else source
                self.add(SourceDocument(doc_id=part_id, title=title, source=where, text=part.text, folder=folder),
                         path)


def _folder_documents(root: Path, out: _Collector) -> None:
    """Every file under `root` that is not hidden or an OS/editor leftover (loaders.ignored): read if its type is
    supported, else reported as skipped, so a folder never loses a document without a word."""
    for path, problem in sorted(folders.walk(root)):
        if problem:
            out.skip(path, 0, problem)
            continue
        rel = path.relative_to(root)
        suffix = path.suffix.lower()
        if suffix == ".jsonl":
            _jsonl_documents(path, out)
        elif suffix in loaders.suffixes():
            out.file(path, rel.with_suffix("").as_posix(), f"{root.resolve().name}/{rel.as_posix()}",
                     root.resolve().name)
        else:
            out.skip(path, 0, f"unsupported file type {suffix or '(no suffix)'}; {_SUPPORTED}")


_SUPPORTED = "ingest reads " + ", ".join((*loaders.suffixes(), ".jsonl"))


def _jsonl_record(line: bytes) -> tuple[str, str, str, str]:
    """(id, title, text, metadata) of one JSONL line, or ValueError saying what is wrong with it. Its metadata is
    every field but "id" and "text" (as a LangChain Document's holds its title): what metadata filters match."""
    try:
        record = json.loads(line.decode("utf-8-sig"))  # utf-8-sig: a BOM before the first record is no error
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg})") from None
    if not isinstance(record, dict):
        raise ValueError('expected a JSON object with "id" and "text"')
    missing = [f'"{name}"' for name in ("id", "text") if record.get(name) is None]
    if missing:
        raise ValueError(f"missing {' and '.join(missing)}")
    doc_id, text, title = record["id"], record["text"], record.get("title")
    if isinstance(doc_id, bool) or not isinstance(doc_id, str | int) or not isinstance(text, str):
        raise ValueError('"id" must be a string or integer and "text" a string')
    if title is not None and (isinstance(title, bool) or not isinstance(title, str | int | float)):
        raise ValueError('"title" must be a string')
    empty = [f'"{name}"' for name, value in (("id", str(doc_id)), ("text", text)) if not value.strip()]
    if empty:
        raise ValueError(f"empty {' and '.join(empty)}")
    doc_id = str(doc_id).strip()
    metadata = encoded_metadata(doc_id, {k: v for k, v in record.items() if k not in ("id", "text")})
    return doc_id, str(title or doc_id), text, metadata


def _jsonl_documents(path: Path, out: _Collector) -> None:
    # Bytes, line by line: only \n ends a record (str.splitlines would also cut at a U+2028 inside a text),
    # and one line in another encoding costs that line, not the file.
    # A record is read up to a bound (JSON may spell a character in 6 bytes): a 200 MB line is skipped, not held.
    longest = out.limits.document_chars * 6 + 4096
    try:
        with path.open("rb") as lines:
            for lineno, line in enumerate(_bounded_lines(lines, longest), 1):
                if line is None:
                    out.skip(path, lineno, f"record longer than {longest:,} bytes (max_ingest_document_chars, "
                             "SELFCRAG_MAX_INGEST_DOCUMENT_CHARS)")
                    continue
                if not line.strip():
                    continue
                try:
                    doc_id, title, text, metadata = _jsonl_record(line)
                    if problem := out.limits.too_long(text):
                        raise ValueError(problem)
                except ValueError as exc:
                    out.skip(path, lineno, str(exc))
                    continue
                out.add(SourceDocument(doc_id=doc_id, title=title, source=path.name, text=text, metadata=metadata),
                        path, lineno)
    except OSError as exc:
        out.skip(path, 0, f"cannot read ({exc.strerror or exc})")


def _bounded_lines(handle: Any, longest: int) -> Iterator[bytes | None]:
    """The file's lines, each read up to `longest` bytes; None for a longer line (its rest read and dropped)."""
    while line := handle.readline(longest + 1):
        if len(line) > longest and not line.endswith(b"\n"):
            while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield None
        else:
            yield line


def _document_id(doc: Any, position: int, shared_sources: set[str]) -> str:
    """A LangChain Document's id: `doc.id`, else metadata `id`, else its `source` (numbered by `page` or `row`,
    or by position, when several Documents share it: a loader's pages and rows do), else a hash of its text, so
    the same text always gets the same id and an append does not add it twice."""
    meta = doc.metadata or {}
    for value in (getattr(doc, "id", None), meta.get("id")):
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    source = meta.get("source")
    if isinstance(source, str) and source.strip():
        if source not in shared_sources:
            return source.strip()
        number = next((meta[k] for k in ("page", "row") if isinstance(meta.get(k), int)), position)
        return f"{source.strip()}/{number}"
    return "text-" + hashlib.sha256(doc.page_content.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _langchain_documents(docs: list[tuple[int, Any]], out: _Collector) -> None:
    sources = [str((d.metadata or {}).get("source", "")).strip() for _, d in docs]
    shared = {s for s in sources if s and sources.count(s) > 1}
    for position, doc in docs:
        where = f"Document {position + 1}"
        if not isinstance(doc.page_content, str) or not doc.page_content.strip():
            out.skip(where, 0, "empty page_content")
            continue
        if problem := out.limits.too_long(doc.page_content):
            out.skip(where, 0, problem)
            continue
        doc_id = _document_id(doc, position, shared)
        meta = doc.metadata or {}
        try:
            metadata = encoded_metadata(doc_id, meta)  # kept, and matched by metadata filters
        except IngestError as exc:
            out.skip(where, 0, str(exc))
            continue
        title = meta.get("title")
        source = meta.get("source")
        out.add(SourceDocument(
            doc_id=doc_id, title=str(title).strip() if title is not None and str(title).strip() else doc_id,
            source=str(source) if isinstance(source, str) and source.strip() else doc_id, text=doc.page_content,
            metadata=metadata,
        ), where)


def read_documents(sources: Iterable[str | Path | Any], strict: bool = False,
                   limits: loaders.Limits | None = None) -> LoadedDocuments:
    """Documents from folders (every supported type, recursively), single files, JSONL corpora and LangChain
    `Document`s, and the inputs left out: a bad JSONL record (invalid JSON, not an object, no or empty id/text,
    wrong types, a repeated id), a file that cannot be read or whose reader is not installed, a file of a type
    ingest does not read in a folder, an empty Document. One bad record in a million should not cost the other
    999,999; `strict` makes the first one an IngestError instead. `limits` bound every read (None: the operator's
    `max_ingest_*` settings from the environment); a file or record beyond them is skipped like a bad one. A
    missing path, a single file of an unsupported type or of a type whose reader is not installed, or an input
    with nothing usable left is always an error."""
    from langchain_core.documents import Document

    sources = list(sources)
    out = _Collector(strict, limits or loaders.Limits.from_env())
    documents = [(n, source) for n, source in enumerate(sources) if isinstance(source, Document)]
    for raw in sources:
        if isinstance(raw, Document):
            continue
        if not isinstance(raw, str | Path):
            raise IngestError(f"cannot ingest a {type(raw).__name__}: give paths or LangChain Documents")
        path = Path(raw).expanduser()
        suffix = path.suffix.lower()
        if not path.exists():
            raise IngestError(f"{raw}: no such file or directory")
        if path.is_dir():
            _folder_documents(path, out)
        elif suffix == ".jsonl":
            _jsonl_documents(path, out)
        elif suffix in loaders.suffixes():
            if (problem := loaders.missing_package(suffix)) is not None:
                raise IngestError(f"{raw}: {problem}")
            out.file(path, path.stem, path.name, path.resolve().parent.name)
        else:
            raise IngestError(f"{raw}: unsupported file type; {_SUPPORTED}, or a folder")
    _langchain_documents(documents, out)
    if not out.documents:
        names = [str(s) for s in sources if not isinstance(s, Document)]
        names += [f"{len(documents)} Documents"] if documents else []
        where = ", ".join(names) or "no paths"
        if out.skipped:
            raise IngestError(f"no usable documents in {where}: {len(out.skipped)} skipped, the first: "
                              f"{out.skipped[0]}")
        raise IngestError(f"no documents found in {where}")
    return LoadedDocuments(out.documents, out.skipped)


def load_documents(paths: Iterable[str | Path | Any]) -> list[SourceDocument]:
    """`read_documents(paths, strict=True)`: the documents, or an IngestError at the first bad input."""
    return read_documents(paths, strict=True).documents


# --- chunking ---------------------------------------------------------------------------------------


def _separators(text: str, sentences: list[str]) -> list[str]:
    """The whitespace that stood before each sentence, so list items and paragraphs keep their line breaks."""
    seps, pos = [], 0
    for sentence in sentences:
        at = text.find(sentence, pos)
        gap = text[pos:at] if at >= 0 else " "
        # Chinese sentences follow each other without a space: none is added.
        seps.append("\n\n" if "\n\n" in gap else "\n" if "\n" in gap else " " if gap else "")
        pos = at + len(sentence) if at >= 0 else pos
    return seps


# A long sentence stays whole up to this many times a chunk's size (a fact is not cut mid-sentence); past it
# (a minified line, a base64 dump, a 200 MB line of one character) it is cut into chunk-sized pieces, by words
# and, where a "word" is too long, by characters, so no embedding tokenizer is ever handed a giant string.
_WHOLE_SENTENCE = 4
# Characters a chunk may hold per word of its size: English words average about six.
_CHARS_PER_WORD = 12
_PIECE = re.compile(r"\S+\s*")


def _cost(text: str) -> int:
    """A text's size in words for chunking: its words, or its characters / `_CHARS_PER_WORD` when that is more
    (ordinary text never: only runs without spaces)."""
    return max(approx_tokens(text), len(text) // _CHARS_PER_WORD)


def _bounded(sentence: str, max_words: int) -> list[str]:
    """The sentence, or when it is over `_WHOLE_SENTENCE` chunks long, pieces of at most `max_words` words and
    `max_words * _CHARS_PER_WORD` characters (Chinese: `max_words` characters)."""
    if len(sentence) <= max_words or _cost(sentence) <= _WHOLE_SENTENCE * max_words:
        return [sentence]
    longest = max_words * _CHARS_PER_WORD
    pieces: list[str] = []
    current, size = "", 0
    for match in _PIECE.finditer(sentence):
        word = match.group(0)
        cap = max_words if _CJK_RUN.search(word) else longest
        for start in range(0, len(word), cap):  # a word longer than a piece is cut by characters
            part = word[start : start + cap]
            cost = _cost(part)
            if current and (size + cost > max_words or len(current) + len(part) > longest):
                pieces.append(current.rstrip())
                current, size = "", 0
            current, size = current + part, size + cost
    if current.strip():
        pieces.append(current.rstrip())
    return pieces


def _chunk_text(text: str, max_words: int, overlap: int) -> list[str]:
    sentences = [piece for sentence in split_sentences(text) for piece in _bounded(sentence, max_words)]
    seps = _separators(text, sentences)
    groups: list[list[int]] = []
    current: list[int] = []
    for i, sentence in enumerate(sentences):
        size = sum(_cost(sentences[j]) for j in current)
        if current and size + _cost(sentence) > max_words:
            groups.append(current)
            # Repeat the last sentence(s) so a fact split across the boundary is whole in one chunk,
            # but never the whole chunk again, and never past the size limit.
            carry = current[-overlap:] if 0 < overlap < len(current) else []
            if sum(_cost(sentences[j]) for j in carry) + _cost(sentence) > max_words:
                carry = []
            current = list(carry)
        current.append(i)
    if current:
        groups.append(current)
    return ["".join((seps[j] if n else "") + sentences[j] for n, j in enumerate(group)) for group in groups]


def chunk_documents(docs: Iterable[SourceDocument], max_words: int = 180, overlap_sentences: int = 1) -> list[Chunk]:
    """Sentence-aware chunks of at most `max_words` words (a longer single sentence stays whole, up to
    `_WHOLE_SENTENCE` times that; a longer one is cut into pieces)."""
    chunks = []
    for doc in docs:
        for index, text in enumerate(_chunk_text(doc.text, max_words, overlap_sentences)):
            chunks.append(Chunk(f"{doc.doc_id}#{index}", doc.doc_id, index, doc.title, doc.source, text,
                                doc.metadata))
    return chunks
