"""The size bounds of ingest on small files with small caps: each file or record beyond a cap is one skip with the
cap named, the rest is read; a sentence far longer than a chunk is cut so no chunk is long."""

from __future__ import annotations

import json
import zipfile
import zlib

import pytest
from langchain_core.documents import Document
from support.pdf import write_objects

from selfcrag.context import Context
from selfcrag.errors import IngestError
from selfcrag.knowledge import loaders
from selfcrag.knowledge.documents import SourceDocument, chunk_documents, read_documents

SMALL = loaders.Limits(file_bytes=2_000, document_chars=500, unpacked_bytes=10_000)


def test_the_caps_are_operator_settings_with_environment_fallbacks(monkeypatch):
    monkeypatch.setenv("SELFCRAG_MAX_INGEST_FILE_BYTES", "1234")
    limits = loaders.Limits.from_env()
    assert limits.file_bytes == 1234 and limits.document_chars == Context().max_ingest_document_chars
    with pytest.raises(ValueError, match="an operator setting"):
        from selfcrag.trust_boundary import resolve

        resolve({"max_ingest_file_bytes": 5}, Context())


def test_each_file_beyond_a_cap_is_one_skip_and_the_rest_is_read(tmp_path):
    (tmp_path / "big.md").write_text("word " * 1000, encoding="utf-8")  # 5,000 bytes: over the file cap
    (tmp_path / "long.txt").write_text("é" * 900, encoding="utf-8")  # 1,800 bytes, 900 characters: over the text cap
    (tmp_path / "ok.md").write_text("# Ok\n\nReturns take 30 days.", encoding="utf-8")
    loaded = read_documents([tmp_path], limits=SMALL)
    assert [d.doc_id for d in loaded.documents] == ["ok"]
    reasons = {s.file.rsplit("/", 1)[-1]: s.reason for s in loaded.skipped}
    assert reasons["big.md"].startswith("file is 5,000 bytes, above the 2,000 bytes cap on one file")
    assert reasons["long.txt"].startswith("text longer than 500 characters (max_ingest_document_chars")
    with pytest.raises(IngestError, match="big.md: file is 5,000 bytes"):
        read_documents([tmp_path], strict=True, limits=SMALL)


def test_a_long_jsonl_record_is_skipped_without_being_held_and_the_next_one_read(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "a", "text": "x" * 450}) + "\n")  # within both bounds
        handle.write(json.dumps({"id": "b", "text": "y" * 520}) + "\n")  # the text is over the cap
        handle.write(json.dumps({"id": "c", "text": "z " * 4000}) + "\n")  # the line is over the byte bound
        handle.write(json.dumps({"id": "d", "text": "fine"}) + "\n")
    loaded = read_documents([corpus], limits=SMALL)
    assert [d.doc_id for d in loaded.documents] == ["a", "d"]
    assert [(s.line, s.reason.split(" (")[0]) for s in loaded.skipped] == [
        (2, "text longer than 500 characters"), (3, "record longer than 7,096 bytes")]


def test_a_long_langchain_document_is_skipped():
    loaded = read_documents([Document("ok"), Document("w " * 400)], limits=SMALL)
    assert len(loaded.documents) == 1 and loaded.skipped[0].reason.startswith("text longer than 500")


def test_a_docx_that_unpacks_past_the_cap_is_refused_before_it_is_unpacked(tmp_path):
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as docx:
        docx.writestr("word/document.xml", " " * 50_000)
    assert bomb.stat().st_size < SMALL.file_bytes
    with pytest.raises(loaders.Unreadable, match=r"unpacks to 50,000 bytes, above the 10,000 bytes cap"):
        loaders.read_file(bomb, SMALL)


def test_a_sentence_far_longer_than_a_chunk_is_cut_and_a_long_one_stays_whole():
    line = SourceDocument("line", "t", "s", "x" * 3_000_000)  # one "word" of three million characters
    words = SourceDocument("words", "t", "s", "word " * 10_000)
    chinese = SourceDocument("zh", "t", "s", "退货" * 5_000)
    long_sentence = SourceDocument("long", "t", "s", " ".join(["word"] * 500) + ".")  # under 4 chunks: whole
    chunks = chunk_documents([line, words, chinese, long_sentence], max_words=180)
    by_doc = {doc: [c.text for c in chunks if c.doc_id == doc] for doc in ("line", "words", "zh", "long")}
    assert max(map(len, by_doc["line"])) == 180 * 12 and "".join(by_doc["line"]) == line.text
    assert max(len(text.split()) for text in by_doc["words"]) == 180
    assert max(map(len, by_doc["zh"])) == 180 and "".join(by_doc["zh"]) == chinese.text
    assert by_doc["long"] == [long_sentence.text]


def write_pdf_bomb(path, unpacked: int) -> None:
    """A one-page PDF whose content stream is `unpacked` bytes of spaces before its text, deflated to a few hundred."""
    content = zlib.compress(b" " * unpacked + b"BT /F1 12 Tf 72 720 Td (Returns take 30 days.) Tj ET", 9)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content) + content + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    write_objects(path, objects)


def test_a_pdf_stream_that_decompresses_past_the_cap_is_refused_and_the_cap_is_only_for_that_read(tmp_path):
    pytest.importorskip("pypdf")
    bomb = tmp_path / "bomb.pdf"
    write_pdf_bomb(bomb, 50_000)
    assert bomb.stat().st_size < SMALL.file_bytes
    with pytest.raises(loaders.Unreadable, match=r"a stream decompresses past the 10,000 bytes cap"):
        loaders.read_file(bomb, SMALL)
    (part,) = loaders.read_file(bomb)  # the default cap: the same file reads
    assert "Returns take 30 days." in part.text
