"""The files of a saved index, written whole and checked field by field before anything is believed.

A damaged file must give one line naming the file and what is wrong — never a traceback, and never an
allocation the file cannot back: `vectors.faiss` says in its header how many vectors follow, and faiss
allocates that much before it reads them (a 4.6 KB file claiming 2 GB grew a process to 2.4 GB), so the
header is parsed here and checked against the file's real size before faiss sees it. The keyword index is the
directory `keywords/` (keywords.py writes and checks it; changed: issue 46). Indexes saved before it hold
`bm25.npz` (uncompressed numpy arrays; `read_keywords` still reads them for bm25.py, the reference BM25) or
`bm25.json`: they open after `selfcrag reindex DIR` rebuilds their keyword index from `chunks.jsonl`.
"""

from __future__ import annotations

import io
import json
import math
import shutil
import struct
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from selfcrag.errors import DamagedFile

MANIFEST, VECTORS, CHUNKS = "manifest.json", "vectors.faiss", "chunks.jsonl"
KEYWORD_DIR = "keywords"  # keywords.py's directory (issue 46)
KEYWORDS = "bm25.npz"  # bm25.py's arrays: the keyword index of indexes saved before keywords/
LEGACY_KEYWORDS = "bm25.json"  # the keyword index of indexes saved before bm25.npz
FILES = (MANIFEST, VECTORS, CHUNKS)  # what makes an index complete (an old one too: it is told to reindex)
KNOWN = (*FILES, KEYWORD_DIR, KEYWORDS, LEGACY_KEYWORDS)  # what may sit in an index directory a save replaces
CHUNK_FIELDS = {"id": str, "doc_id": str, "chunk_index": int, "title": str, "source": str, "text": str}
# faiss's IndexFlatIP on disk: fourcc, d (int32), ntotal (int64), two unused int64, is_trained (uint8),
# metric (int32; 0 = inner product), then the vectors as a float array: its length (uint64) and the floats.
_FLAT_IP = b"IxFI"
_HEADER = struct.Struct("<4siqqqBiQ")


def is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is not a count


def is_number(value: object) -> bool:
    return (is_integer(value) or isinstance(value, float)) and math.isfinite(value)  # type: ignore[arg-type]


def complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in FILES)


# --- writing ----------------------------------------------------------------------------------------


def _write(path: Path, parts: Iterable[bytes]) -> None:
    with path.open("wb") as out:
        for part in parts:
            out.write(part)


def write_files(directory: Path, vectors: Any, chunks: Iterable[dict[str, Any]], keywords: Path,
                manifest: dict[str, Any]) -> None:
    """`keywords`: the keyword index's directory, copied in. The manifest goes last: a directory without one was
    never finished."""
    import faiss

    _write(directory / VECTORS, [faiss.serialize_index(vectors).tobytes()])
    _write(directory / CHUNKS, ((json.dumps(c, ensure_ascii=False) + "\n").encode() for c in chunks))
    shutil.copytree(keywords, directory / KEYWORD_DIR)
    write_manifest(directory, manifest)


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    _write(directory / MANIFEST, [(json.dumps(manifest, indent=2) + "\n").encode()])


# --- reading ----------------------------------------------------------------------------------------


def _json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise DamagedFile(f"{path.name}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise DamagedFile(f"{path.name}: invalid JSON at line {exc.lineno} ({exc.msg})") from None
    except RecursionError:
        raise DamagedFile(f"{path.name}: JSON nested too deeply") from None


def read_manifest(directory: Path) -> dict[str, Any]:
    manifest = _json_file(directory / MANIFEST)
    if not isinstance(manifest, dict):
        raise DamagedFile(f"{MANIFEST}: expected a JSON object")
    checks = {"format_version": is_integer, "embedder": lambda v: isinstance(v, str), "dim": is_integer,
              "chunks": is_integer}
    for name, ok in checks.items():
        if name not in manifest:
            raise DamagedFile(f'{MANIFEST}: "{name}" is missing')
        if not ok(manifest[name]):
            kind = "a string" if name == "embedder" else "an integer"
            raise DamagedFile(f'{MANIFEST}: "{name}" must be {kind}, not {json.dumps(manifest[name])[:40]}')
    for name in ("tokenizer", "created"):
        if name in manifest and not isinstance(manifest[name], str):
            raise DamagedFile(f'{MANIFEST}: "{name}" must be a string')
    if manifest.get("vector_index", "flat") not in ("flat", "hnsw"):  # absent: saved before HNSW, so flat
        raise DamagedFile(f'{MANIFEST}: "vector_index" must be "flat" or "hnsw"')
    if manifest["dim"] <= 0 or manifest["chunks"] < 0:
        raise DamagedFile(f'{MANIFEST}: "dim" must be positive and "chunks" not negative')
    return manifest


def read_vectors(directory: Path, dim: int, count: int, kind: str = "flat") -> Any:
    """The FAISS index (`kind` as the manifest records it), after every size its file claims has been checked
    against the file's real size and the manifest."""
    import faiss

    path = directory / VECTORS
    size = path.stat().st_size
    with path.open("rb") as f:
        if kind == "hnsw":
            _check_hnsw(f, size, dim, count)
        _check_flat(f, size, dim, count)
    return faiss.read_index(str(path))


def _check_flat(f: BinaryIO, size: int, dim: int, count: int) -> None:
    """A flat inner-product index from the file's position to its end (the whole file, or an HNSW's storage)."""
    at = f.tell()
    head = f.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise DamagedFile(f"{VECTORS}: {size} bytes, too short for a FAISS header")
    fourcc, d, ntotal, _, _, _, metric, floats = _HEADER.unpack(head)
    if fourcc != _FLAT_IP or metric != 0:
        raise DamagedFile(f"{VECTORS}: not a flat inner-product FAISS index (type {fourcc!r}, metric {metric})")
    if d <= 0 or ntotal < 0 or floats != d * ntotal:
        raise DamagedFile(f"{VECTORS}: header is inconsistent ({ntotal} vectors of {d} dimensions, {floats} floats)")
    claimed = at + _HEADER.size + 4 * floats
    if size != claimed:
        raise DamagedFile(f"{VECTORS}: {size:,} bytes but its header claims {ntotal:,} vectors of {d} dimensions "
                          f"({claimed:,} bytes)")
    if (d, ntotal) != (dim, count):
        raise DamagedFile(f"{VECTORS}: holds {ntotal} vectors of {d} dimensions but {MANIFEST} says "
                          f"{count} of {dim}")


# faiss's IndexHNSWFlat on disk: fourcc, d, ntotal, two unused int64, is_trained, metric; then the graph as five
# length-prefixed arrays and five int32 (entry point, top level, efConstruction, efSearch, unused); then its
# vectors as a flat index. faiss believes every length and every neighbour id (an id past the end is read at search
# time, not checked), so each is checked here first.
_HNSW = b"IHNf"
_HNSW_HEADER = struct.Struct("<4siqqqBi")
_HNSW_ARRAYS = (("assign_probas", "<f8"), ("cum_nneighbor_per_level", "<i4"), ("levels", "<i4"),
                ("offsets", "<u8"), ("neighbors", "<i4"))
_HNSW_TAIL = struct.Struct("<5i")


def _check_hnsw(f: BinaryIO, size: int, dim: int, count: int) -> None:
    head = f.read(_HNSW_HEADER.size)
    if len(head) < _HNSW_HEADER.size:
        raise DamagedFile(f"{VECTORS}: {size} bytes, too short for a FAISS header")
    fourcc, d, ntotal, _, _, _, metric = _HNSW_HEADER.unpack(head)
    if fourcc != _HNSW or metric != 0:
        raise DamagedFile(f"{VECTORS}: not an HNSW inner-product FAISS index (type {fourcc!r}, metric {metric})")
    if (d, ntotal) != (dim, count):
        raise DamagedFile(f"{VECTORS}: holds {ntotal} vectors of {d} dimensions but {MANIFEST} says "
                          f"{count} of {dim}")
    graph: dict[str, np.ndarray] = {}
    for name, dtype in _HNSW_ARRAYS:
        length = f.read(8)
        values = struct.unpack("<Q", length)[0] if len(length) == 8 else -1
        need = values * np.dtype(dtype).itemsize
        if values < 0 or f.tell() + need > size:
            raise DamagedFile(f"{VECTORS}: its HNSW {name} runs past the end of the file ({size:,} bytes)")
        graph[name] = np.frombuffer(f.read(need), dtype=dtype)
    tail = f.read(_HNSW_TAIL.size)
    if len(tail) < _HNSW_TAIL.size:
        raise DamagedFile(f"{VECTORS}: {size:,} bytes, cut inside its HNSW graph")
    entry, top, _, ef_search, _ = _HNSW_TAIL.unpack(tail)
    cum, levels, offsets, neighbors = (graph[n] for n in ("cum_nneighbor_per_level", "levels", "offsets",
                                                          "neighbors"))
    problem = ""
    if len(cum) < 2 or cum[0] != 0 or (np.diff(cum) < 0).any():
        problem = "neighbours per level are not counts"
    elif len(levels) != ntotal or len(offsets) != ntotal + 1:
        problem = f"{len(levels)} levels and {len(offsets)} offsets for {ntotal} vectors"
    elif ntotal and (levels.min() < 1 or levels.max() >= len(cum)):
        problem = "a vector's level is out of range"
    elif offsets[0] != 0 or offsets[-1] != len(neighbors) or not np.array_equal(np.diff(offsets.astype(np.int64)),
                                                                                cum[levels]):
        problem = "neighbour offsets do not match the levels"
    elif len(neighbors) and (neighbors.min() < -1 or neighbors.max() >= ntotal):
        problem = "a neighbour id is out of range"
    elif ntotal and not (0 <= entry < ntotal and top == levels[entry] - 1 == levels.max() - 1):
        problem = "its entry point is not a vector of the top level"
    elif not 0 < ef_search <= 100_000:  # the depth of every search: it sizes each query's heaps
        problem = f"search depth {ef_search} is out of range"
    if problem:
        raise DamagedFile(f"{VECTORS}: HNSW graph is inconsistent ({problem})")


def _chunk_record(line: bytes, lineno: int) -> dict[str, Any]:
    where = f"{CHUNKS} line {lineno}"
    try:
        record = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise DamagedFile(f"{where}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise DamagedFile(f"{where}: invalid JSON ({exc.msg})") from None
    if not isinstance(record, dict):
        raise DamagedFile(f"{where}: expected a JSON object")
    for name, kind in CHUNK_FIELDS.items():
        if name not in record:
            raise DamagedFile(f'{where}: "{name}" is missing')
        value = record[name]
        if not (is_integer(value) if kind is int else isinstance(value, kind)):
            raise DamagedFile(f'{where}: "{name}" must be {"an integer" if kind is int else "a string"}')
    if record["chunk_index"] < 0 or record["id"] != f"{record['doc_id']}#{record['chunk_index']}":
        raise DamagedFile(f'{where}: "id" {record["id"]!r} does not match "doc_id" and "chunk_index"')
    if not isinstance(record.get("metadata", ""), str):  # written only for a document that has metadata
        raise DamagedFile(f'{where}: "metadata" must be a string')
    return {name: record[name] for name in (*CHUNK_FIELDS, *(["metadata"] if "metadata" in record else []))}


def read_chunks(directory: Path, count: int) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    with (directory / CHUNKS).open("rb") as lines:
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            if len(records) == count:
                raise DamagedFile(f"{CHUNKS}: more than the {count} chunks {MANIFEST} says")
            records.append(_chunk_record(line, lineno))
    if len(records) != count:
        raise DamagedFile(f"{CHUNKS}: {len(records)} chunks but {MANIFEST} says {count}")
    return records


def read_keywords(directory: Path, dtypes: dict[str, str]) -> tuple[str, Any]:
    """(file name, state): the arrays of `bm25.npz` (each of the dtype `dtypes` names), or the JSON of an older
    index's `bm25.json`."""
    path = directory / KEYWORDS
    if not path.is_file() and (directory / LEGACY_KEYWORDS).is_file():
        return LEGACY_KEYWORDS, _json_file(directory / LEGACY_KEYWORDS)
    try:
        with zipfile.ZipFile(path) as archive:
            return KEYWORDS, {name: _stored_array(archive, name, np.dtype(dtype)) for name, dtype in dtypes.items()}
    except zipfile.BadZipFile as exc:  # also a member whose bytes fail their CRC
        raise DamagedFile(f"{KEYWORDS}: not a readable archive ({exc})") from None


def _stored_array(archive: zipfile.ZipFile, name: str, dtype: np.dtype) -> np.ndarray:
    where = f'{KEYWORDS}: "{name}"'
    try:
        member = archive.getinfo(f"{name}.npy")
    except KeyError:
        raise DamagedFile(f"{where} is missing") from None
    if member.compress_type != zipfile.ZIP_STORED or member.file_size != member.compress_size:
        raise DamagedFile(f"{where} is compressed; only stored arrays are read")  # no inflating past the file
    data = archive.read(member)  # as many bytes as the file really holds (a short file fails here)
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, found = read_header(stream)
    except ValueError as exc:
        raise DamagedFile(f"{where}: not a numpy array ({_first_line(exc)})") from None
    if found != dtype or len(shape) != 1 or fortran:
        raise DamagedFile(f"{where} must be a one-dimensional {dtype.name} array, not {found} of shape {shape}")
    if stream.tell() + shape[0] * dtype.itemsize != len(data):
        raise DamagedFile(f"{where}: {len(data) - stream.tell():,} bytes of data but its header claims "
                          f"{shape[0]:,} values")
    return np.frombuffer(data, dtype=dtype, count=shape[0], offset=stream.tell())


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
