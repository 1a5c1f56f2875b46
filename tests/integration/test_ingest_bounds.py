"""Ingest is bounded (issue 23 finding 8): a 200 MB one-line text file and a zip-bomb DOCX cost one skip line each,
not the process, and the process stays small; symlinks that leave the ingested folder are refused, loops named.
Everything through the real `selfcrag ingest` (a subprocess where its peak memory is measured)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from selfcrag.cli import main

BIG = 200_000_000
GB = 1 << 20  # ru_maxrss is in kilobytes on Linux: this many is a gigabyte


def folder_with_big_text(tmp_path: Path) -> Path:
    """A folder holding a 200 MB text file of one line (sparse: it takes a few KB of disk) and a good document."""
    kb = tmp_path / "kb"
    kb.mkdir()
    with (kb / "big.txt").open("wb") as handle:
        handle.write(b"The return window is ")
        handle.seek(BIG - 1)
        handle.write(b"x")
    (kb / "returns.md").write_text("# Returns\n\nItems can be returned within 30 days.\n", encoding="utf-8")
    return kb


def ingest_in_a_subprocess(args: list[str], env: dict[str, str]) -> tuple[int, str, int]:
    """(exit status, stderr, peak resident memory in KB) of `selfcrag ingest ARGS`."""
    child = subprocess.Popen([sys.executable, "-m", "selfcrag.cli", "ingest", *args], stderr=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, env={**os.environ, **env}, text=True)
    assert child.stderr is not None
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, stderr, usage.ru_maxrss


@pytest.mark.parametrize(("env", "reason"), [
    ({}, "big.txt: file is 200.0 MB, above the 50.0 MB cap on one file (max_ingest_file_bytes"),
    # with the file cap raised, the stream read stops past the document cap instead
    ({"SELFCRAG_MAX_INGEST_FILE_BYTES": "300000000"},
     "big.txt: text longer than 10,000,000 characters (max_ingest_document_chars"),
])
def test_a_200_mb_one_line_file_costs_one_skip_line_and_little_memory(tmp_path, env, reason):
    kb = folder_with_big_text(tmp_path)
    status, stderr, peak = ingest_in_a_subprocess([str(kb), "--index", str(tmp_path / "index")], env)
    assert status == 0, stderr
    skips = [line for line in stderr.splitlines() if line.startswith("selfcrag: warning: skipped ")]
    assert len(skips) == 1 and reason in skips[0]
    # The process that read it stays far below the 3.4 GB at which tokenizers aborted (the embedding model
    # itself takes about 0.35 GB).
    assert peak < GB, f"peak resident memory {peak} KB"


def write_zip_bomb_docx(path: Path, unpacked: int) -> None:
    """A DOCX whose document part is `unpacked` bytes of spaces inside its XML: a few hundred KB on disk."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as docx:
        docx.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/'
                      'package/2006/content-types"/>')
        with docx.open("word/document.xml", "w", force_zip64=True) as part:
            part.write(b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
                       b'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>')
            block = b" " * (1 << 20)
            for _ in range(unpacked >> 20):
                part.write(block)
            part.write(b"</w:t></w:r></w:p></w:body></w:document>")


def test_a_zip_bomb_docx_is_skipped_before_it_is_unpacked(tmp_path, capsys):
    kb = tmp_path / "kb"
    kb.mkdir()
    write_zip_bomb_docx(kb / "bomb.docx", 256 << 20)
    assert (kb / "bomb.docx").stat().st_size < 2_000_000
    (kb / "returns.md").write_text("# Returns\n\nItems can be returned within 30 days.\n", encoding="utf-8")
    assert main(["ingest", str(kb), "--index", str(tmp_path / "index")]) == 0
    err = capsys.readouterr().err
    (skip,) = [line for line in err.splitlines() if line.startswith("selfcrag: warning: skipped ")]
    assert "bomb.docx: unpacks to 268.4 MB, above the 200.0 MB cap (max_ingest_unpacked_bytes" in skip


def test_symlinks_leaving_the_folder_are_refused_and_loops_named(tmp_path, capsys):
    kb = tmp_path / "kb"
    (kb / "sub").mkdir(parents=True)
    (kb / "returns.md").write_text("# Returns\n\nItems can be returned within 30 days.\n", encoding="utf-8")
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n\nThe vault code is 4711.\n", encoding="utf-8")
    (kb / "secret.md").symlink_to(outside)  # a file outside the folder
    (kb / "passwd.txt").symlink_to("/etc/passwd")
    (kb / "elsewhere").symlink_to(tmp_path)  # a folder outside it
    (kb / "loop.md").symlink_to(kb / "loop.md")  # a link to itself
    (kb / "sub" / "up").symlink_to(kb)  # a folder that holds the link
    (kb / "gone.md").symlink_to(kb / "missing.md")
    (kb / "inside.md").symlink_to(kb / "returns.md")  # inside the folder: read
    (kb / "alias").symlink_to(kb / "sub")  # a folder inside it: read where it lies, once
    index = tmp_path / "index"
    assert main(["ingest", str(kb), "--index", str(index)]) == 0
    err = capsys.readouterr().err
    skips = {Path(m.group(1)).name: m.group(2) for m in re.finditer(r"^selfcrag: warning: skipped (\S+): (.*)$", err,
                                                                      re.M)}
    assert set(skips) == {"secret.md", "passwd.txt", "elsewhere", "loop.md", "up", "gone.md", "alias"}, err
    assert skips["alias"] == "symlink to the folder sub; read there, not twice"
    assert "outside the ingested folder: refused" in skips["secret.md"]
    assert f"symlink to {Path('/etc/passwd').resolve()}, outside the ingested folder: refused" in skips["passwd.txt"]
    assert "outside the ingested folder: refused" in skips["elsewhere"]
    assert "symlink loop" in skips["loop.md"] and "symlink loop" in skips["up"]
    assert "broken symlink" in skips["gone.md"]
    chunks = (index / "chunks.jsonl").read_text(encoding="utf-8") if (index / "chunks.jsonl").exists() else ""
    texts = chunks + "".join(p.read_text(encoding="utf-8", errors="replace") for p in index.glob("*.json*"))
    assert "4711" not in texts and "root:" not in texts
    assert "inside" in texts  # the symlink to a file inside the folder was read
