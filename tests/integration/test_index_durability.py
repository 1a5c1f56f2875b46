"""Indexes survive what deployments do to them: `kill -9` in the middle of a save, a full disk, damaged
files, and corpora with bad records — with real processes, real files and the real CLI.

A save must leave the complete old index or the complete new one, never neither; a damaged index must be
refused in one line without allocating what its header claims; a bad record must cost that record only.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from selfcrag.knowledge.documents import SourceDocument, chunk_documents
from selfcrag.knowledge.retrieval import HybridIndex
from selfcrag.text.text import keyword_tokens

CLI = [sys.executable, "-m", "selfcrag.cli"]
SRC = str(Path(__file__).resolve().parents[2] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


class HashedWords:
    """Deterministic embeddings without a model: a hashed bag of words. A child process that only loads and
    saves needs nothing but the same name."""

    name = "test/durable"
    dim = 64

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in keyword_tokens(text):
                out[row, zlib.crc32(token.encode()) % self.dim] += 1.0
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def build(tag: str, documents: int) -> HybridIndex:
    docs = [SourceDocument(f"{tag}-{i}", f"{tag} {i}", f"{tag}.jsonl",
                           f"The {tag} index, document {i}. It holds fact number {i * 7} about topic {i % 13}.")
            for i in range(documents)]
    return HybridIndex.build(chunk_documents(docs), HashedWords())


def which(directory: Path, old: HybridIndex, new: HybridIndex) -> str:
    """'old' or 'new': the index that loads from `directory` (a load error or a mix fails the test)."""
    chunks = HybridIndex.load(directory, HashedWords()).chunks
    if chunks == old.chunks:
        return "old"
    assert chunks == new.chunks, "the index loaded is neither the old one nor the new one"
    return "new"


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.parent.iterdir() if p.name.startswith(directory.name + "."))


# --- kill -9 in the middle of a save ----------------------------------------------------------------

# A parent that imports selfcrag once (seconds on a busy machine) and forks one saver per command; the test
# SIGKILLs the saver. `pause SOURCE TARGET N` saves SOURCE's index to TARGET and stops dead after its Nth
# write, fsync or rename (0: never); `loop TARGET A B` saves A and B to TARGET in turn until killed.
# Nothing in selfcrag knows about these hooks: they wrap os.rename, os.fsync and the file writer here.
SAVERS = """
import os, sys, time
from selfcrag.knowledge import index_files
from selfcrag.knowledge.retrieval import HybridIndex

class Named:
    name = "test/durable"

def pause(source, target, stop):
    index, events = HybridIndex.load(source, Named()), [0]
    def pausing(step):
        def run(*args, **kwargs):
            result = step(*args, **kwargs)
            events[0] += 1
            if events[0] == stop:
                print("paused", os.getpid(), os.path.exists(target), flush=True)
                while True:
                    time.sleep(60)  # the test kills us here
            return result
        return run
    os.rename, os.fsync, index_files._write = pausing(os.rename), pausing(os.fsync), pausing(index_files._write)
    index.save(target)
    print("events", os.getpid(), events[0], flush=True)

def loop(target, *sources):
    indexes = [HybridIndex.load(source, Named()) for source in sources]
    for n in range(10**6):
        started = time.perf_counter()
        indexes[n % 2].save(target)
        print("saved", os.getpid(), time.perf_counter() - started, flush=True)

for line in sys.stdin:
    command, *args = line.split()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            pause(args[0], args[1], int(args[2])) if command == "pause" else loop(*args)
        finally:
            sys.stdout.flush()
            os._exit(0)
    print("exit", pid, os.waitpid(pid, 0)[1], flush=True)
"""


class Savers:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SAVERS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=ENV)

    def send(self, *words: object) -> list[str]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def read(self) -> list[str]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        assert line, "the saver process ended"
        return line

    def kill(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)
        while (line := self.read())[0] != "exit":
            pass  # lines a looping saver printed before it died
        assert line[1:] == [str(pid), str(signal.SIGKILL)]  # killed by SIGKILL, nothing else


@pytest.fixture(scope="module")
def savers():
    parent = Savers()
    yield parent
    parent.proc.kill()
    parent.proc.wait()


def test_kill_9_at_every_step_of_a_save_leaves_the_old_or_the_new_index(savers: Savers, tmp_path: Path) -> None:
    old, new = build("old", 300), build("new", 400)
    source = tmp_path / "source"
    new.save(source)

    # A save that runs to the end: how many steps it has (writes, fsyncs, renames).
    old.save(tmp_path / "counted")
    done = savers.send("pause", source, tmp_path / "counted", 0)
    assert savers.read()[:3] == ["exit", done[1], "0"]
    steps = int(done[2])
    assert steps >= 10 and which(tmp_path / "counted", old, new) == "new"

    outcomes, missing_while_paused = [], []
    for stop in range(1, steps + 1):
        target = tmp_path / f"index-{stop}"
        old.save(target)
        paused, pid, exists = savers.send("pause", source, target, stop)
        assert paused == "paused"
        if exists == "False":
            missing_while_paused.append(stop)
        savers.kill(int(pid))
        outcomes.append(which(target, old, new))
        old.save(target)  # the next save clears what the killed one left beside the index
        assert leftovers(target) == [], stop

    # Killed before the swap: the old index; after it: the new one. Between the two renames the
    # directory was missing, and the load put the old one back.
    assert outcomes == sorted(outcomes, key=["old", "new"].index) and set(outcomes) == {"old", "new"}
    assert missing_while_paused, "no kill landed between the two renames"


def test_kill_9_at_random_moments_of_repeated_saves(savers: Savers, tmp_path: Path) -> None:
    first, second = build("old", 2000), build("new", 2500)  # megabytes: a save takes a while to kill inside
    first.save(tmp_path / "a")
    second.save(tmp_path / "b")
    seed = random.randrange(10**6)
    moments = random.Random(seed)
    target = tmp_path / "index"
    first.save(target)
    kinds = []
    for _ in range(5):
        saved, pid, seconds = savers.send("loop", target, tmp_path / "a", tmp_path / "b")
        assert saved == "saved"  # one whole save done: the next one is underway
        time.sleep(moments.uniform(0, 2 * float(seconds)))  # a random moment, not a bound on anything
        savers.kill(int(pid))
        kinds.append(which(target, first, second))  # fails the test, naming neither, if it is neither
    print(f"seed {seed}: save took {float(seconds):.2f}s; loaded after each kill: {kinds}")
    first.save(target)
    assert leftovers(target) == []  # what the killed savers left is gone after the next save


# --- the real CLI -------------------------------------------------------------------------------------


def run(*args: str, limit_file_size: int = 0) -> subprocess.CompletedProcess[str]:
    def limit() -> None:  # a file larger than this fails to write (EFBIG), as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_size, limit_file_size))

    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, env=ENV,
                          preexec_fn=limit if limit_file_size else None)


def corpus(path: Path, records: list[dict | str]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cli_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index built by `selfcrag ingest` with the default embeddings, as users build one."""
    folder = tmp_path_factory.mktemp("cli")
    records = [{"id": "tides", "title": "Tides", "text": "Quellport has two high tides a day."},
               {"id": "bridges", "title": "Bridges", "text": "Quellport has four bridges over the river Amsel."}]
    proc = run("ingest", str(corpus(folder / "corpus.jsonl", records)), "--index", str(folder / "index"))
    assert proc.returncode == 0, proc.stderr
    return folder / "index"


def files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_ingest_on_a_full_disk_fails_in_one_line_and_keeps_the_old_index(cli_index: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    shutil.copytree(cli_index, index)
    before = files(index)
    records = [{"id": f"doc{i}", "text": f"Document {i} says that fact {i} is true."} for i in range(60)]
    # 60 vectors of 384 floats are 92 KB: the vectors file cannot be written under a 32 KB limit.
    proc = run("ingest", str(corpus(tmp_path / "big.jsonl", records)), "--index", str(index),
               limit_file_size=32 * 1024)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "File too large" in proc.stderr
    assert files(index) == before and leftovers(index) == []
    proc = run("ask", "How many bridges does Quellport have?", "--index", str(index), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["citations"][0]["doc_id"] == "bridges"


MEASURE = """
import json, resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps([proc.returncode, proc.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))
"""


def test_a_vectors_file_claiming_2_gb_is_refused_without_allocating_it(cli_index: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    shutil.copytree(cli_index, index)
    d, n = 384, 1_398_102  # 2 GB of float32 vectors claimed by a 4.6 KB file
    (index / "vectors.faiss").write_bytes(struct.pack("<4siqqqBiQ", b"IxFI", d, n, 1 << 20, 1 << 20, 1, 0, d * n)
                                          + bytes(4_600))
    assert (index / "vectors.faiss").stat().st_size < 4_700
    out = subprocess.run([sys.executable, "-c", MEASURE, *CLI, "ask", "How many bridges?", "--index", str(index)],
                         capture_output=True, text=True, timeout=300, env=ENV)
    returncode, stderr, max_rss_kb = json.loads(out.stdout)
    assert returncode == 1 and len(stderr.strip().splitlines()) == 1, stderr
    assert f"index at {index} is damaged: vectors.faiss: 4,645 bytes but its header claims 1,398,102 vectors" in stderr
    # The CLI needs ~340 MB (langgraph, faiss, numpy); reading what the header claims would add 2 GB.
    assert max_rss_kb < 1024 * 1024, f"the process grew to {max_rss_kb // 1024} MB"


def _set_chunk_index(index: Path) -> None:
    lines = (index / "chunks.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1])
    record["chunk_index"] = "0"
    (index / "chunks.jsonl").write_text("\n".join([lines[0], json.dumps(record)]) + "\n", encoding="utf-8")


def _keyword_offsets(index: Path) -> None:
    start = np.load(index / "keywords" / "start.npy")
    np.save(index / "keywords" / "start.npy", start + 7)  # postings past the end of the file


def _truncate_vectors(index: Path) -> None:
    data = (index / "vectors.faiss").read_bytes()
    (index / "vectors.faiss").write_bytes(data[: len(data) - 100])


@pytest.mark.parametrize(("damage", "message"), [
    (_set_chunk_index, 'is damaged: chunks.jsonl line 2: "chunk_index" must be an integer'),
    (_keyword_offsets, "has a damaged keyword index: keywords/start.npy: offsets must rise from 0 to"),
    (_truncate_vectors, "is damaged: vectors.faiss: 3,017 bytes but its header claims 2 vectors of 384 dimensions "
                        "(3,117 bytes)"),
])
def test_ask_on_a_damaged_index_says_what_is_wrong_in_one_line(cli_index: Path, tmp_path: Path, damage,
                                                                message: str) -> None:
    index = tmp_path / "index"
    shutil.copytree(cli_index, index)
    damage(index)
    proc = run("ask", "How many bridges?", "--index", str(index))
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"selfcrag: error: index at {index} {message}"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_ingest_skips_bad_records_with_a_warning_each_and_strict_refuses_them(tmp_path: Path) -> None:
    path = corpus(tmp_path / "corpus.jsonl", [
        {"id": "tides", "text": "Quellport has two high tides a day."},
        {"id": "empty", "text": ""},
        "{not json",
        {"id": "bridges", "text": "Quellport has four bridges over the river Amsel."},
    ])
    index = tmp_path / "index"
    proc = run("ingest", str(path), "--index", str(index))
    assert proc.returncode == 0, proc.stderr
    assert "indexed 2 documents" in proc.stdout
    assert proc.stderr.strip().splitlines() == [
        f'selfcrag: warning: skipped {path}:2: empty "text"',
        f"selfcrag: warning: skipped {path}:3: invalid JSON (Expecting property name enclosed in double quotes)",
        "selfcrag: warning: 2 bad records or files skipped (listed above); --strict makes the first one an error",
    ]
    built = files(index)

    proc = run("ingest", str(path), "--index", str(index), "--strict")
    assert proc.returncode == 1
    assert proc.stderr == f'selfcrag: error: {path}:2: empty "text"\n'
    assert files(index) == built  # a refused ingest leaves the index it would have replaced

    nothing = corpus(tmp_path / "nothing.jsonl", [{"id": "a", "text": " "}])
    proc = run("ingest", str(nothing), "--index", str(tmp_path / "none"))
    assert proc.returncode == 1 and "no usable documents" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "none").exists()


def test_reindex_converts_an_older_index_that_ask_refused_in_one_line(cli_index: Path, tmp_path: Path) -> None:
    """An index as selfcrag saved it before issue 46 (format 1, keywords in bm25.npz): `ask` names `selfcrag reindex`,
    which rebuilds the keyword index from chunks.jsonl without embedding anything; then `ask` answers from it."""
    from selfcrag.knowledge.bm25 import BM25
    from selfcrag.knowledge.documents import Chunk
    from selfcrag.knowledge.retrieval import index_text

    index = tmp_path / "index"
    shutil.copytree(cli_index, index)
    chunks = [Chunk(**json.loads(line)) for line in (index / "chunks.jsonl").read_text().splitlines()]
    shutil.rmtree(index / "keywords")
    with (index / "bm25.npz").open("wb") as out:
        np.savez(out, **BM25([keyword_tokens(index_text(c)) for c in chunks]).to_arrays())  # type: ignore[arg-type]
    manifest = json.loads((index / "manifest.json").read_text())
    (index / "manifest.json").write_text(json.dumps({**manifest, "format_version": 1}))
    vectors = (index / "vectors.faiss").read_bytes()

    proc = run("ask", "How many bridges?", "--index", str(index))
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.strip().endswith(f"`selfcrag reindex {index}` (nothing is embedded again)"), proc.stderr
    proc = run("reindex", str(index))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"rebuilt the keyword index of 2 chunks in {index}"), proc.stdout
    assert (index / "vectors.faiss").read_bytes() == vectors and not (index / "bm25.npz").exists()
    proc = run("ask", "How many bridges does Quellport have?", "--index", str(index), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["citations"][0]["doc_id"] == "bridges"
    proc = run("reindex", str(tmp_path / "nowhere"))
    assert proc.returncode == 1 and proc.stderr.strip() == (
        f"selfcrag: error: no index at {tmp_path / 'nowhere'}; build one with `selfcrag ingest PATH --index "
        f"{tmp_path / 'nowhere'}`")
