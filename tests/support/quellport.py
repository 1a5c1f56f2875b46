"""The small Quellport knowledge base the ingest tests build and change (directory and PostgreSQL alike), and an
embedder that records what it is asked to embed, so a test can tell which chunks were embedded again."""

from __future__ import annotations

from pathlib import Path

from selfcrag.knowledge.embeddings import default_embedder

TIDES = "# Tides\n\nThe harbour of Quellport has two high tides a day. The highest tide reaches 7.5 metres in March."
BRIDGES = "# Bridges\n\nQuellport has four bridges over the river Amsel."
BRIDGES_NOW = "# Bridges\n\nQuellport has five bridges over the river Amsel since the new one opened in 2023."
FERRY = "# Ferry\n\nThe ferry to Ostholm leaves every 40 minutes and a single ticket costs 4.20 euros."


class Counting:
    """The local model, recording every text it is asked to embed (same name: the same knowledge base)."""

    def __init__(self) -> None:
        self.inner = default_embedder()
        self.name, self.languages = self.inner.name, self.inner.languages
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]):  # noqa: ANN201
        self.texts += texts
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str):  # noqa: ANN201
        return self.inner.embed_query(text)


def folder(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root
