"""One reader per file type: the text (and title, when the file names one) of a Markdown, text, HTML, CSV, PDF or
DOCX file. documents.py decides ids, default titles and what a failure costs; this module only reads.

- `.md`, `.markdown`, `.txt`: UTF-8 text as it is (a file that is not says where, and names Windows-1252 when it
  reads as that).
- `.html`, `.htm`: the visible text (beautifulsoup4 with Python's own parser; scripts, styles and other
  non-text elements dropped, and so are comments and hidden elements: a reader never sees them, so they are a
  place to plant instructions, not to inform) and the `<title>`. Not langchain-community's `BSHTMLLoader`: it
  keeps the text of `<script>` and `<style>` and needs lxml by default.
- `.csv`: one document per row, each as `column: value` lines (blank cells left out). A row is the unit a table
  is asked about ("what does plan X cost?"), a whole file would be cut into chunks across rows, and a row-level id
  lets `--append` replace one changed row without re-embedding the rest. Read with the stdlib `csv` module rather
  than `CSVLoader`, which keeps blank cells and reports every fault as one generic RuntimeError.
- `.pdf`: pypdf, one document per page (`Part.page`, 1-based: a citation can say where), the PDF's own title.
  Lines a paragraph was wrapped into are joined again and a heading ends its paragraph (`unwrap`), so an answer
  quoting a sentence carries neither a line break nor the heading above it.
- `.docx`: docx2txt.

Read with pypdf and docx2txt directly, not through langchain-community's loaders: those are thin wrappers over the
same calls, and langchain-community with its dependencies is some 80 MB that only ingest would use.

HTML, PDF and DOCX need the `loaders` extra (beautifulsoup4, pypdf, docx2txt); a file whose package is missing
fails with one line naming it.

Every read is bounded (`Limits`, the operator's `max_ingest_*` settings): a file larger than the cap is refused
before it is opened, text is read in a stream and refused past the document cap, a DOCX whose zip members unpack
to more than the unpack cap is refused before docx2txt inflates it, and pypdf's per-stream decompression limits
are lowered to the same cap for the read. A hostile file costs a skip line, never the process.
"""

from __future__ import annotations

import csv
import importlib.util
import re
import zipfile
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from selfcrag.context import Context
from selfcrag.errors import Unreadable

EXTRA_HINT = "pip install 'selfcrag[loaders]'"
# The module each reader imports, and the package that provides it.
_NEEDS = {".html": ("bs4", "beautifulsoup4"), ".htm": ("bs4", "beautifulsoup4"), ".pdf": ("pypdf", "pypdf"),
          ".docx": ("docx2txt", "docx2txt")}  # fmt: skip
# Elements whose content is never visible text.
_INVISIBLE = ("script", "style", "noscript", "template", "svg", "head")
# Inline styles that hide an element from every reader.
_HIDDEN_STYLE = re.compile(
    r"display\s*:\s*none|visibility\s*:\s*hidden|(?:font-size|opacity)\s*:\s*0(?![.\d]*[1-9])", re.I)
# Elements that start a new line of text (HTML's block elements, and line breaks).
_BLOCKS = ("p", "div", "br", "h1", "h2", "h3", "h4", "h5", "h6", "li", "dt", "dd", "tr", "pre", "blockquote",
           "section", "article", "header", "footer", "aside", "nav", "main", "table", "ul", "ol", "dl", "figcaption",
           "hr", "address", "details", "summary")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_PARAGRAPH = "\u2029"  # Unicode's paragraph separator: where a heading ended
# PDF text has a line break wherever the page's width ran out. A line at least this share of the page's longest
# line was cut by the width (it goes on in the next line); a shorter one that ends no sentence is a heading or a
# label. (Ragged-right lines vary by a few words; headings are a few words.)
_WRAPPED_SHARE = 0.6
_SENTENCE_ENDS = tuple(".!?:;。！？：；")
_LIST_ITEM = re.compile(r"[-*•·▪◦]\s|\d+[.)]\s")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
# Files a folder may hold that are nobody's document: OS thumbnails and folder settings.
_OS_FILES = frozenset({"thumbs.db", "desktop.ini"})


@dataclass(frozen=True)
class Limits:
    """The size bounds of one ingest (context.py `max_ingest_*`)."""

    file_bytes: int = Context.model_fields["max_ingest_file_bytes"].default
    document_chars: int = Context.model_fields["max_ingest_document_chars"].default
    unpacked_bytes: int = Context.model_fields["max_ingest_unpacked_bytes"].default

    @classmethod
    def of(cls, settings: Any) -> Limits:
        return cls(settings.max_ingest_file_bytes, settings.max_ingest_document_chars,
                   settings.max_ingest_unpacked_bytes)

    @classmethod
    def from_env(cls) -> Limits:
        return cls.of(Context.from_env())

    def too_long(self, text: str) -> str:
        """Why a document's text is refused ("" when it is within the cap)."""
        if len(text) <= self.document_chars:
            return ""
        return (f"text longer than {self.document_chars:,} characters (max_ingest_document_chars, "
                "SELFCRAG_MAX_INGEST_DOCUMENT_CHARS); split the document or raise the cap")


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1_000_000 else f"{n:,} bytes"


@dataclass(frozen=True)
class Part:
    """What a file holds: one document, or (CSV) one per row; `key` tells the parts of one file apart."""

    text: str
    title: str | None = None
    key: str = ""
    page: int | None = None  # a PDF's page, from 1


def ignored(relative: PurePath) -> bool:
    """Left out of a folder without a word: hidden files and folders (`.git`, `.DS_Store`), Office lock files
    (`~$report.docx`), editor backups (`notes.md~`) and OS thumbnails/settings (`Thumbs.db`, `desktop.ini`)."""
    name = relative.name
    return (any(part.startswith(".") for part in relative.parts) or name.startswith("~$") or name.endswith("~")
            or name.lower() in _OS_FILES)  # fmt: skip


def suffixes() -> tuple[str, ...]:
    return tuple(_READERS)


def missing_package(suffix: str) -> str | None:
    """Why a file with this suffix cannot be read here (its package is not installed), or None."""
    module, package = _NEEDS.get(suffix, ("", ""))
    if module and importlib.util.find_spec(module) is None:
        return f"reading {suffix} needs {package}: {EXTRA_HINT}"
    return None


def read_file(path: Path, limits: Limits | None = None) -> list[Part]:
    """The parts of a supported file (see `suffixes`) within `limits`; Unreadable with the reason otherwise."""
    limits = limits or Limits()
    suffix = path.suffix.lower()
    if (problem := missing_package(suffix)) is not None:
        raise Unreadable(problem)
    try:
        size = path.stat().st_size
        if size > limits.file_bytes:
            raise Unreadable(f"file is {_size(size)}, above the {_size(limits.file_bytes)} cap on one file "
                             "(max_ingest_file_bytes, SELFCRAG_MAX_INGEST_FILE_BYTES)")
        parts = _READERS[suffix](path, limits)
        for part in parts:
            if problem := limits.too_long(part.text):
                raise Unreadable(problem)
        return parts
    except Unreadable:
        raise
    except UnicodeDecodeError:
        raise Unreadable(_not_utf8(path)) from None
    except OSError as exc:
        raise Unreadable(f"cannot read ({exc.strerror or exc})") from None
    except Exception as exc:  # each parser raises its own errors for a broken file
        kind = suffix.lstrip(".").upper()
        raise Unreadable(f"cannot read {kind} ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None


def _not_utf8(path: Path) -> str:
    """Why a text file was refused, and what to do: an editor on Windows saves Windows-1252 (Latin-1's superset),
    which selfcrag does not guess at (any bytes decode as Latin-1, so a guess could index mojibake unseen)."""
    try:
        data = path.read_bytes()  # within the file cap, checked before the read that failed
        data.decode("utf-8-sig")
        return "not UTF-8 text"
    except OSError:
        return "not UTF-8 text"
    except UnicodeDecodeError as exc:
        at = exc.start
    try:
        data.decode("cp1252")
    except UnicodeDecodeError:
        return f"not UTF-8 text (byte {at})"
    return (f"not UTF-8 text (byte {at}; it reads as Latin-1/Windows-1252: save it as UTF-8, e.g. "
            "iconv -f cp1252 -t utf-8)")


def _text(path: Path, limits: Limits) -> list[Part]:
    # A stream read that stops one character past the cap: a huge file (or one line of it) never sits in memory
    # whole. (The file cap alone does not bound this: a cap raised for PDFs would let a text file through.)
    with path.open(encoding="utf-8") as handle:
        text = handle.read(limits.document_chars + 1)
    if problem := limits.too_long(text):
        raise Unreadable(problem)
    return [Part(text)]


def _html(path: Path, limits: Limits) -> list[Part]:
    from bs4 import BeautifulSoup
    from bs4.element import NavigableString

    # Bytes: BeautifulSoup reads the page's own <meta charset> (or guesses) instead of assuming UTF-8.
    soup = BeautifulSoup(path.read_bytes(), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for element in soup(_INVISIBLE):
        element.decompose()
    for element in soup.find_all(_hidden):
        element.decompose()
    # Comments, doctype, CDATA, processing instructions: strings of a subclass, never shown. Removed before the
    # strings are rewritten below, which would turn them into plain text.
    for node in soup.find_all(string=lambda s: type(s) is not NavigableString):
        node.extract()
    # A line break in the source is a space; a block element (paragraph, heading, list item, row) is a line.
    for node in soup.find_all(string=True):
        node.replace_with(re.sub(r"\s+", " ", node))  # keeps the space around an inline element: "costs <b>12"
    for element in soup(_BLOCKS):
        element.insert_before("\n")
        element.insert_after("\n")
    # A heading ends a paragraph: without a blank line after it, "Express" and the sentence below it were read as
    # one sentence and quoted as one. (Every whitespace in the page's own text became a space above, so the
    # paragraph separator marks only these.)
    for element in soup(_HEADINGS):
        element.insert_after(_PARAGRAPH)
    lines = (line.strip(" ") for line in soup.get_text().split("\n"))  # only spaces are left besides the marks
    text = "\n".join(line for line in lines if line)
    return [Part(text.replace(f"{_PARAGRAPH}\n", "\n\n").replace(_PARAGRAPH, ""), title or None)]


def _hidden(element: object) -> bool:
    attrs = getattr(element, "attrs", None) or {}
    return ("hidden" in attrs or str(attrs.get("aria-hidden", "")).lower() == "true"
            or bool(_HIDDEN_STYLE.search(str(attrs.get("style", "")))))


def _csv(path: Path, limits: Limits) -> list[Part]:
    # utf-8-sig: spreadsheets write a BOM before the header; newline="" lets csv read quoted line breaks.
    with path.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        return []
    header = [name.strip() or f"column {n}" for n, name in enumerate(rows[0], 1)]
    parts = []
    for number, row in enumerate(rows[1:], 1):
        cells = [(header[i] if i < len(header) else f"column {i + 1}", value.strip()) for i, value in enumerate(row)]
        text = "\n".join(f"{name}: {value}" for name, value in cells if value)
        if text:  # a blank row is no document
            parts.append(Part(text, key=f"row-{number}"))
    return parts


def _pdf(path: Path, limits: Limits) -> list[Part]:
    from pypdf import PdfReader

    with _pdf_limits(limits.unpacked_bytes):
        try:
            reader = PdfReader(path)
            pages = [page.extract_text() or "" for page in reader.pages]
            title = reader.metadata.title if reader.metadata else None
        except Exception as exc:
            if type(exc).__name__ != "LimitReachedError":
                raise
            raise Unreadable(f"a stream decompresses past the {_size(limits.unpacked_bytes)} cap "
                             "(max_ingest_unpacked_bytes, SELFCRAG_MAX_INGEST_UNPACKED_BYTES): a decompression bomb?"
                             ) from None
    if problem := limits.too_long("\n\n".join(pages)):  # the cap is on the file's text, as for any other file
        raise Unreadable(problem)
    title = title.strip() if isinstance(title, str) and title.strip() else None
    return [Part(unwrap(text), title, key=f"page-{number}", page=number)
            for number, text in enumerate(pages, 1) if text.strip()]


def unwrap(text: str) -> str:
    """PDF text as paragraphs: the lines the page's width cut a paragraph into are one line again, and a heading
    (a short line that ends no sentence, before a capital) ends its paragraph, so neither a line break nor the
    heading is quoted inside an answer's sentence. Blank lines, list items and lines that end a sentence stay."""
    lines = [line.strip() for line in text.replace("\r\n", "\n").split("\n")]
    full = max((len(line) for line in lines), default=0)
    out = ""
    for before, line in zip(["", *lines], lines, strict=False):
        if not line or not out or not before:
            out += ("\n" if out else "") + line  # after a blank line: a new paragraph, as the page has it
        elif before.endswith(_SENTENCE_ENDS) or _LIST_ITEM.match(line):
            out += "\n" + line
        elif len(before) >= _WRAPPED_SHARE * full or not line[:1].isupper() and not _CJK.match(line):
            out += ("" if _CJK.match(before[-1]) and _CJK.match(line) else " ") + line  # Chinese joins unspaced
        else:
            out += "\n\n" + line
    return re.sub(r"\n{3,}", "\n\n", out).strip()


_PDF_OUTPUTS = ("maximum_declared_stream_length", "array_based_stream_maximum_output_length",
                "jbig2_maximum_output_length", "lzw_maximum_output_length", "run_length_maximum_output_length",
                "zlib_maximum_output_length", "brotli_maximum_output_length", "image_maximum_buffer_size")


def _pdf_limits(unpacked: int) -> AbstractContextManager[object]:
    """pypdf's per-stream decompression limits (75 MB each by default) lowered to the unpack cap for this read
    only (pypdf 6.5+ scopes its configuration to the context; an older pypdf keeps its own defaults)."""
    import pypdf

    apply = getattr(pypdf, "apply_configuration", None)
    if apply is None:
        return nullcontext()
    current = pypdf.get_configuration()
    fields = {name: min(getattr(current, name), unpacked) for name in _PDF_OUTPUTS if hasattr(current, name)}
    return apply(**fields)  # type: ignore[no-any-return]


def _docx(path: Path, limits: Limits) -> list[Part]:
    # A DOCX is a zip: a few KB can declare gigabytes. zipfile never inflates a member past its declared size, so
    # the declared sizes bound what docx2txt can unpack.
    with zipfile.ZipFile(path) as archive:
        unpacked = sum(info.file_size for info in archive.infolist())
    if unpacked > limits.unpacked_bytes:
        raise Unreadable(f"unpacks to {_size(unpacked)}, above the {_size(limits.unpacked_bytes)} cap "
                         "(max_ingest_unpacked_bytes, SELFCRAG_MAX_INGEST_UNPACKED_BYTES): a decompression bomb?")
    import docx2txt

    return [Part(docx2txt.process(str(path)))]


_READERS = {".md": _text, ".markdown": _text, ".txt": _text, ".html": _html, ".htm": _html, ".csv": _csv,
            ".pdf": _pdf, ".docx": _docx}  # fmt: skip

