"""The `indexer` graph (`langgraph.json`): documents sent to a LangGraph server are added to the operator's index,
as the rag-research template's indexer does, so LangGraph Studio users can add documents.

Input: `documents`, a list of `{"id"?, "title"?, "source"?, "text", ...}` objects (other fields are metadata, as
in a JSONL corpus) or LangChain Document dicts (`{"page_content", "metadata", "id"?}`). They are appended
(`ingest(..., append=True)`): new ids added, changed documents replaced, unchanged ones kept without re-embedding.
Output: the counts of the ingest report.

It writes the deployment's index, so it is the operator's choice: with `allow_ingest` off (the default) every run
fails with one line and writes nothing. It writes only the operator's own `index_dir`, never one a run names
(`allow_per_run` may open `index_dir` for reading several indexes; a write there would let any client write any
directory the server can). The selfcrag graph sees the new documents on its next run: its index is reloaded
when the saved one changes (loaded_indexes.open_index).
"""

from __future__ import annotations

from typing import Any

from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from selfcrag.context import Context
from selfcrag.errors import IngestError
from selfcrag.graph import operator_settings
from selfcrag.knowledge.embeddings import embedder_for
from selfcrag.knowledge.ingestion import ingest
from selfcrag.knowledge.loaders import Limits
from selfcrag.setting_names import check_configurable
from selfcrag.trust_boundary import resolve

NAME = "selfcrag-indexer"  # of the compiled graph, as traces show it


class IndexerInput(TypedDict):
    documents: list[dict[str, Any]]


class IndexerOutput(TypedDict, total=False):
    index_dir: str
    indexed: int  # documents read from the input
    added: int
    replaced: int
    unchanged: int
    kept: int  # documents of the index the input did not name
    chunks: int  # in the index now
    embedded: int  # texts embedded
    reused: int  # texts whose vectors the index held
    skipped: list[str]  # input left out, and why


class IndexerState(IndexerInput, IndexerOutput):
    pass


def _document(item: Any) -> Any:
    """A LangChain Document from one input item, or ValueError saying what is wrong with it."""
    from langchain_core.documents import Document

    if not isinstance(item, dict):
        raise ValueError('expected an object with "text" (or a Document\'s "page_content")')
    text = item.get("page_content", item.get("text"))
    if not isinstance(text, str):
        raise ValueError('"text" (or "page_content") must be a string')
    raw_id = item.get("id")
    if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, str | int)):
        raise ValueError('"id" must be a string or an integer')
    # A plain item's fields other than id and text are its metadata, as a JSONL record's are (documents.py)
    metadata = item.get("metadata") if "page_content" in item else {
        name: value for name, value in item.items() if name not in ("id", "text") and value is not None
    }
    if not isinstance(metadata, dict):
        raise ValueError('"metadata" must be an object')
    return Document(page_content=text, metadata=metadata, id=str(raw_id) if raw_id is not None else None)


def _documents(items: Any) -> tuple[list[Any], list[str]]:
    if not isinstance(items, list) or not items:
        raise IngestError('the indexer needs "documents": a non-empty list of {"id", "title", "text"} objects')
    documents, skipped = [], []
    for n, item in enumerate(items):
        try:
            documents.append(_document(item))
        except ValueError as exc:
            skipped.append(f"documents[{n}]: {exc}")
    if not documents:
        raise IngestError(f"no usable documents: {len(skipped)} skipped, the first: {skipped[0]}")
    return documents, skipped


def build_indexer(settings: Context | dict[str, Any] | None = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the indexer graph; `settings` are the operator's, as for `build_graph` (the environment fills the
    rest, read at each run)."""
    base = operator_settings(settings)

    def index_documents(state: IndexerState, runtime: Runtime[Context]) -> dict[str, Any]:
        check_configurable(get_config(), runtime.context, Context.model_fields)
        operator = base()
        resolve(runtime.context, operator)  # a run that asks for an operator setting fails as in the selfcrag graph
        if not operator.allow_ingest:
            raise IngestError("this server does not accept documents: its operator has not enabled the indexer "
                              "(SELFCRAG_ALLOW_INGEST=1); nothing was written")
        if not operator.index_dir:
            raise IngestError("the indexer adds to the operator's index (SELFCRAG_INDEX_DIR), and none is set; "
                              "nothing was written")

        documents, skipped = _documents(state.get("documents"))
        report = ingest(documents, operator.index_dir, append=True, embeddings=embedder_for(operator.embeddings),
                        limits=Limits.of(operator))
        return {
            "index_dir": report.index_dir, "indexed": report.documents, "added": report.added,
            "replaced": report.replaced, "unchanged": report.unchanged, "kept": report.kept,
            "chunks": report.chunks, "embedded": report.embedded, "reused": report.reused,
            "skipped": skipped + [str(s) for s in report.skipped],
        }

    graph = StateGraph(IndexerState, context_schema=Context, input_schema=IndexerInput, output_schema=IndexerOutput)
    graph.add_node("index_documents", index_documents)
    graph.add_edge(START, "index_documents")
    graph.add_edge("index_documents", END)
    return graph.compile(name=NAME)


graph = build_indexer()
