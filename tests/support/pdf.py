"""Small real PDFs for tests, written byte by byte as the format says (no PDF-writing package needed)."""

from __future__ import annotations

from pathlib import Path


def write_pdf(path: Path, lines: list[str], title: str = "", *more_pages: list[str]) -> Path:
    """A PDF with `lines` in Helvetica on its first page (and `more_pages` after it) and an optional document
    title: objects, then the xref table of their byte offsets, then the trailer."""
    pages = [lines, *more_pages]
    font = 3 + 2 * len(pages)  # catalog, page tree, then a page and its content stream per page
    kids = " ".join(f"{3 + 2 * n} 0 R" for n in range(len(pages)))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode()]
    for n, page in enumerate(pages):
        text = " ".join(f"({line}) Tj T*" for line in page)
        content = f"BT /F1 12 Tf 14 TL 72 720 Td {text} ET".encode()
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (4 + 2 * n, font))
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    objects += [b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>", f"<< /Title ({title}) >>".encode()]
    return write_objects(path, objects, info=len(objects) if title else None)


def write_objects(path: Path, objects: list[bytes], info: int | None = None) -> Path:
    """A PDF of `objects` (numbered from 1, the first the catalog; `info`: the number of a document-info object):
    the objects, then the xref table of their byte offsets, then the trailer."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    trailer_info = b" /Info %d 0 R" % info if info else b""
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, trailer_info, xref)
    path.write_bytes(bytes(out))
    return path
