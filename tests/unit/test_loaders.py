"""Reading each file type from real small files (the DOCX written here and the PDF in support/pdf.py byte by byte, as
their formats say), folders that report what they cannot read, and LangChain Documents in."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest
from langchain_core.documents import Document
from support.pdf import write_pdf

from selfcrag.errors import IngestError
from selfcrag.knowledge import loaders
from selfcrag.knowledge.documents import chunk_documents, read_documents
from selfcrag.text.text import split_sentences


def write_docx(path: Path, paragraphs: list[str]) -> Path:
    """A minimal Word document: the package's content types, its relationship to the main part, and the body."""
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    with zipfile.ZipFile(path, "w") as docx:
        docx.writestr("[Content_Types].xml", (
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
            'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
            'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/'
            'document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main'
            '+xml"/></Types>'))
        docx.writestr("_rels/.rels", (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
            '2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
            'relationships/officeDocument" Target="word/document.xml"/></Relationships>'))
        docx.writestr("word/document.xml",
                      f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{w}"><w:body>{body}</w:body>'
                      "</w:document>")
    return path


def test_html_keeps_visible_text_and_the_title_and_drops_scripts_and_styles(tmp_path: Path) -> None:
    page = tmp_path / "shipping.html"
    page.write_bytes(
        '<html><head><meta charset="iso-8859-1"><title>Shipping &amp; rates</title>'
        "<style>body { color: red }</style><script>var secret = 'tracking pixel';</script></head>"
        "<body><h1>Express</h1><p>Express costs <b>12</b> \xe9cus.</p><script>alert(1)</script>"
        "<noscript>Enable JavaScript</noscript><p>Standard   shipping\n is free.</p></body></html>".encode("latin-1")
    )
    (doc,) = read_documents([page]).documents

    assert (doc.doc_id, doc.title, doc.source) == ("shipping", "Shipping & rates", "shipping.html")
    assert doc.text == "Express\n\nExpress costs 12 écus.\nStandard shipping is free."


def test_an_html_heading_is_a_sentence_of_its_own(tmp_path: Path) -> None:
    page = tmp_path / "returns.html"
    page.write_text("<h2>Return window</h2><p>You have 30 days to return an item.</p>"
                    "<h3>Refunds</h3>Refunds take 5 days.", encoding="utf-8")
    (doc,) = read_documents([page]).documents
    (chunk,) = chunk_documents([doc])
    assert split_sentences(chunk.text) == ["Return window", "You have 30 days to return an item.", "Refunds",
                                           "Refunds take 5 days."]


def test_csv_is_one_document_per_row_with_its_column_names(tmp_path: Path) -> None:
    table = tmp_path / "plans.csv"
    table.write_text('\ufeffplan,price,notes\nBasic,5,\n,,\nPlus,9,"two lines\nof notes"\n', encoding="utf-8")
    docs = read_documents([table]).documents

    assert [d.doc_id for d in docs] == ["plans/row-1", "plans/row-3"]  # the blank row 2 is no document
    assert docs[0].text == "plan: Basic\nprice: 5"
    assert docs[1].text == "plan: Plus\nprice: 9\nnotes: two lines\nof notes"
    assert {d.title for d in docs} == {"plans"} and {d.source for d in docs} == {"plans.csv"}


def test_pdf_reads_its_text_and_its_own_title(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "warranty-2024.pdf", ["The warranty lasts two years.", "Batteries: six months."],
                    title="Warranty terms")
    (doc,) = read_documents([pdf]).documents
    assert doc.title == "Warranty terms"
    assert "The warranty lasts two years." in doc.text and "Batteries: six months." in doc.text

    untitled = write_pdf(tmp_path / "care_guide.pdf", ["Wash at 30 degrees."])
    (doc,) = read_documents([untitled]).documents
    assert (doc.title, doc.text.strip()) == ("care guide", "Wash at 30 degrees.")


def test_a_pdf_is_one_document_per_page_and_its_source_names_the_page(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "manual.pdf", ["Setup", "Plug the charger in."], "Manual",
                    ["Warranty", "The warranty lasts two", "years from the day of", "delivery."],
                    ["Batteries: six months."])
    docs = read_documents([pdf]).documents
    assert [(d.doc_id, d.title, d.source) for d in docs] == [
        ("manual/page-1", "Manual", "manual.pdf#page=1"), ("manual/page-2", "Manual", "manual.pdf#page=2"),
        ("manual/page-3", "Manual", "manual.pdf#page=3")]
    # The lines one sentence was wrapped into are one line again; the heading above it is its own paragraph.
    assert docs[1].text == "Warranty\n\nThe warranty lasts two years from the day of delivery."
    assert [c.source for c in chunk_documents(docs)] == ["manual.pdf#page=1", "manual.pdf#page=2",
                                                         "manual.pdf#page=3"]


def test_unwrapping_joins_wrapped_lines_and_keeps_paragraphs_headings_and_lists() -> None:
    text = ("Returns\nItems can be returned within\n30 days of delivery.\n\nRefunds are paid to the\ncard used.\n"
            "- Boxes\n")
    assert loaders.unwrap(text) == ("Returns\n\nItems can be returned within 30 days of delivery.\n\n"
                                    "Refunds are paid to the card used.\n- Boxes")
    # A line the width cut before a capitalised name goes on; a short line before one is a heading.
    assert loaders.unwrap("Write to our support team through\nParcelly Chat.\nHours\nEvery day.") == \
        "Write to our support team through Parcelly Chat.\nHours\n\nEvery day."
    assert loaders.unwrap("退货须在收到商品后\n三十天内申请。\n运费") == "退货须在收到商品后三十天内申请。\n运费"


def test_pdf_and_docx_need_only_the_loaders_extra_not_langchain_community(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("langchain_community", "langchain_community.document_loaders"):  # as if it were not installed
        monkeypatch.setitem(sys.modules, name, None)
    pdf = write_pdf(tmp_path / "terms.pdf", ["Terms apply."])
    docx = write_docx(tmp_path / "memo.docx", ["A memo."])
    assert [d.text.strip() for d in read_documents([pdf, docx], strict=True).documents] == ["Terms apply.", "A memo."]


def test_docx_reads_its_paragraphs(tmp_path: Path) -> None:
    docx = write_docx(tmp_path / "onboarding.docx", ["Welcome aboard.", "Badges are issued on day one."])
    (doc,) = read_documents([docx]).documents
    assert (doc.doc_id, doc.title) == ("onboarding", "onboarding")
    assert "Welcome aboard." in doc.text and "Badges are issued on day one." in doc.text


def test_a_folder_reads_every_type_and_reports_what_it_cannot_read(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    (root / "sub").mkdir(parents=True)
    (root / "faq.md").write_text("# FAQ\n\nReturns take 30 days.", encoding="utf-8")
    (root / "page.htm").write_text("<title>Page</title><p>Hello there.</p>", encoding="utf-8")
    (root / "sub" / "rows.csv").write_text("q,a\nWhy?,Because.\n", encoding="utf-8")
    write_pdf(root / "sub" / "terms.pdf", ["Terms apply."])
    write_docx(root / "memo.docx", ["A memo."])
    (root / "corpus.jsonl").write_text('{"id": "j1", "text": "From a corpus."}\n', encoding="utf-8")
    (root / "slides.pptx").write_bytes(b"PK not read")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 nothing else")
    (root / "notes").write_text("no suffix", encoding="utf-8")
    # Never anybody's document, so never reported: hidden files and folders, Office lock files, editor backups,
    # OS thumbnails and folder settings.
    (root / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD.md").write_text("ref", encoding="utf-8")
    (root / "~$memo.docx").write_bytes(b"lock")
    (root / "faq.md~").write_text("old", encoding="utf-8")
    (root / "Thumbs.db").write_bytes(b"\0")
    (root / "desktop.ini").write_text("[.ShellClassInfo]", encoding="utf-8")

    loaded = read_documents([root])

    assert sorted(d.doc_id for d in loaded.documents) == ["faq", "j1", "memo", "page", "sub/rows/row-1",
                                                         "sub/terms/page-1"]
    reasons = {Path(s.file).name: s.reason for s in loaded.skipped}
    assert set(reasons) == {"slides.pptx", "broken.pdf", "notes"}
    assert reasons["slides.pptx"].startswith("unsupported file type .pptx; ingest reads .md, ")
    assert reasons["notes"].startswith("unsupported file type (no suffix)")
    assert reasons["broken.pdf"].startswith("cannot read PDF (")
    with pytest.raises(IngestError, match=r"broken\.pdf: cannot read PDF"):  # sorted: the first one it meets
        read_documents([root], strict=True)


def test_a_missing_reader_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bs4", None)  # as if beautifulsoup4 were not installed
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text("<p>Hi</p>", encoding="utf-8")
    (root / "about.md").write_text("About us.", encoding="utf-8")

    loaded = read_documents([root])
    assert [d.doc_id for d in loaded.documents] == ["about"]
    assert [str(s) for s in loaded.skipped] == [
        f"{root / 'index.html'}: reading .html needs beautifulsoup4: pip install 'selfcrag[loaders]'"]
    with pytest.raises(IngestError) as error:  # a single file: the error itself, one line
        read_documents([root / "index.html"])
    assert str(error.value) == f"{root / 'index.html'}: reading .html needs beautifulsoup4: {loaders.EXTRA_HINT}"


def test_langchain_documents_get_ids_titles_and_sources() -> None:
    docs = read_documents([
        Document(page_content="Refunds take 5 days.", id="refunds", metadata={"title": "Refunds"}),
        Document(page_content="Page one.", metadata={"source": "guide.pdf", "page": 0}),
        Document(page_content="Page two.", metadata={"source": "guide.pdf", "page": 1}),
        Document(page_content="Alone.", metadata={"source": "note.txt", "id": 7}),
        Document(page_content="Nothing but text."),
        Document(page_content="   "),
    ])
    got = [(d.doc_id, d.title, d.source) for d in docs.documents]
    assert got[:4] == [("refunds", "Refunds", "refunds"), ("guide.pdf/0", "guide.pdf/0", "guide.pdf"),
                       ("guide.pdf/1", "guide.pdf/1", "guide.pdf"), ("7", "7", "note.txt")]
    assert got[4][0].startswith("text-") and got[4][0] == got[4][1]  # the same text, the same id every time
    assert [str(s) for s in docs.skipped] == ["Document 6: empty page_content"]

    with pytest.raises(IngestError, match="cannot ingest a dict: give paths or LangChain Documents"):
        read_documents([{"text": "a dict"}])
