"""What an append does with a document whose id the index already holds from another source.

A file's id is its path relative to the folder ingest was given (`README` for `alpha/README.md`), so two folders
that each hold a `README.md` give their files one id. Within one ingest the second is skipped as a duplicate
(documents.py); across appends the index remembers each document's source (`alpha/README.md`), and an incoming
file whose id is held by a document of another source is a clash, not a new version. Without `replace`, the file
takes the id qualified by its folder's name (`beta/README`), so both stay; with `replace` it replaces the old one.
Either way a line names what happened, and every replacement is named in the report.
Both back ends call `settle` with what they hold (ingestion.py for a directory, pg_ingest.py for PostgreSQL).
"""

from __future__ import annotations

from dataclasses import replace as with_fields

from selfcrag.errors import IngestError
from selfcrag.knowledge.documents import SourceDocument


def settle(docs: list[SourceDocument], held: dict[str, str], *, replace: bool) -> tuple[list[SourceDocument],
                                                                                           list[str]]:
    """The documents to write, and one line for each clash: `held` maps the ids the index holds (of those `docs`
    name, or more) to their sources. Only a file's id (SourceDocument.folder set) can clash: an id given with a
    JSONL record or a LangChain Document is explicit, so a known one is an update. A clash whose qualified id is
    held by yet another source, or by another incoming document, is an IngestError that names both."""
    taken = {doc.doc_id for doc in docs}
    out: list[SourceDocument] = []
    notes: list[str] = []
    for doc in docs:
        old = held.get(doc.doc_id)
        if old is None or old == doc.source or not doc.folder:
            out.append(doc)
            continue
        if replace:
            notes.append(f"{doc.source} replaces document {doc.doc_id!r} from {old} (--replace)")
            out.append(doc)
            continue
        qualified = f"{doc.folder}/{doc.doc_id}"
        other = held.get(qualified)
        if qualified in taken or (other is not None and other != doc.source):
            raise IngestError(f"{doc.source}: its id {doc.doc_id!r} is held by {old} and {qualified!r} by "
                              f"{other or 'another document of this ingest'}; --replace replaces {old} with it")
        notes.append(f"{doc.source} goes in as {qualified!r}: the index holds {doc.doc_id!r} from {old} "
                     "(--replace replaces that instead)")
        taken.add(qualified)
        out.append(with_fields(doc, doc_id=qualified))
    return out, notes
