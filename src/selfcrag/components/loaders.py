"""One reader per file type: the text (and title, when the file names one) of a Markdown, text, HTML, CSV, PDF or
DOCX file. documents.py decides ids, default titles and what a failure costs; this module only reads.

- `.md`, `.markdown`, `.txt`: UTF-8 text as it is.
- `.html`, `.htm`: the visible text (beautifulsoup4 with Python's own parser; scripts, styles and other
  non-text elements dropped) and the `<title>`. Not langchain-community's `BSHTMLLoader`: it keeps the text of
  `<script>` and `<style>` and needs lxml by default.
- `.csv`: one document per row, each as `column: value` lines (blank cells left out). A row is the unit a table
  is asked about ("what does plan X cost?"), a whole file would be cut into chunks across rows, and a row-level id
  lets `--append` replace one changed row without re-embedding the rest. Read with the stdlib `csv` module rather
  than `CSVLoader`, which keeps blank cells and reports every fault as one generic RuntimeError.
- `.pdf`: langchain-community's `PyPDFLoader` (pypdf), the whole file as one document, the PDF's own title.
- `.docx`: langchain-community's `Docx2txtLoader` (docx2txt).

HTML, PDF and DOCX need the `loaders` extra; a file whose package is missing fails with one line naming it.
"""

from __future__ import annotations

import csv
import importlib.util
import re
import warnings
from dataclasses import dataclass
from pathlib import Path, PurePath

EXTRA_HINT = "pip install 'selfcrag[loaders]'"
# The module each reader imports, and the package that provides it.
_NEEDS = {".html": ("bs4", "beautifulsoup4"), ".htm": ("bs4", "beautifulsoup4"), ".pdf": ("pypdf", "pypdf"),
          ".docx": ("docx2txt", "docx2txt")}  # fmt: skip
# Elements whose content is never visible text.
_INVISIBLE = ("script", "style", "noscript", "template", "svg", "head")
# Elements that start a new line of text (HTML's block elements, and line breaks).
_BLOCKS = ("p", "div", "br", "h1", "h2", "h3", "h4", "h5", "h6", "li", "dt", "dd", "tr", "pre", "blockquote",
           "section", "article", "header", "footer", "aside", "nav", "main", "table", "ul", "ol", "dl", "figcaption",
           "hr", "address", "details", "summary")
# Files a folder may hold that are nobody's document: OS thumbnails and folder settings.
_OS_FILES = frozenset({"thumbs.db", "desktop.ini"})


class Unreadable(Exception):
    """The file cannot be read as its type says; the message is the reason, without the path."""


@dataclass(frozen=True)
class Part:
    """What a file holds: one document, or (CSV) one per row; `key` tells the parts of one file apart."""

    text: str
    title: str | None = None
    key: str = ""


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


def read_file(path: Path) -> list[Part]:
    """The parts of a supported file (see `suffixes`); Unreadable with the reason otherwise."""
    suffix = path.suffix.lower()
    if (problem := missing_package(suffix)) is not None:
        raise Unreadable(problem)
    try:
        return _READERS[suffix](path)
    except Unreadable:
        raise
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 text") from None
    except OSError as exc:
        raise Unreadable(f"cannot read ({exc.strerror or exc})") from None
    except Exception as exc:  # each parser raises its own errors for a broken file
        kind = suffix.lstrip(".").upper()
        raise Unreadable(f"cannot read {kind} ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None


def _text(path: Path) -> list[Part]:
    return [Part(path.read_text(encoding="utf-8"))]


def _html(path: Path) -> list[Part]:
    from bs4 import BeautifulSoup

    # Bytes: BeautifulSoup reads the page's own <meta charset> (or guesses) instead of assuming UTF-8.
    soup = BeautifulSoup(path.read_bytes(), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for element in soup(_INVISIBLE):
        element.decompose()
    # A line break in the source is a space; a block element (paragraph, heading, list item, row) is a line.
    for node in soup.find_all(string=True):
        node.replace_with(re.sub(r"\s+", " ", node))  # keeps the space around an inline element: "costs <b>12"
    for element in soup(_BLOCKS):
        element.insert_before("\n")
        element.insert_after("\n")
    lines = (line.strip() for line in soup.get_text().split("\n"))
    return [Part("\n".join(line for line in lines if line), title or None)]


def _csv(path: Path) -> list[Part]:
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


def _langchain_loader(loader: object) -> str:
    with warnings.catch_warnings():  # langchain-community warns about its own future on import, every time
        warnings.simplefilter("ignore", DeprecationWarning)
        documents = loader.load()  # type: ignore[attr-defined]
    return "\n\n".join(doc.page_content for doc in documents)


def _pdf(path: Path) -> list[Part]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.document_loaders import PyPDFLoader

        (document,) = PyPDFLoader(str(path), mode="single").load()
    title = document.metadata.get("title")
    return [Part(document.page_content, title.strip() if isinstance(title, str) and title.strip() else None)]


def _docx(path: Path) -> list[Part]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.document_loaders import Docx2txtLoader

        return [Part(_langchain_loader(Docx2txtLoader(str(path))))]


_READERS = {".md": _text, ".markdown": _text, ".txt": _text, ".html": _html, ".htm": _html, ".csv": _csv,
            ".pdf": _pdf, ".docx": _docx}  # fmt: skip

