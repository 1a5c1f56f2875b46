"""The notebooks in notebooks/ run from top to bottom (nbclient, a kernel on this interpreter), so they cannot rot.
Their cells assert what they show; a failing cell fails the test with the cell's error."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.system  # a Jupyter kernel runs the notebooks

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))


def test_the_two_notebooks_are_there():
    assert {p.name for p in NOTEBOOKS} >= {"quickstart.ipynb", "configuration.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_offline(path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    book = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in book.cells), "commit notebooks without outputs"
    # The kernel inherits this environment: no keys or endpoints, so the offline backend runs.
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TAVILY_API_KEY", "TAVILY_API_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    # The kernel is this interpreter (jupyter_client runs the native `python3` kernel on sys.executable).
    client = NotebookClient(book, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [out for cell in book.cells for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors
