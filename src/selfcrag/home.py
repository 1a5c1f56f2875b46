"""Where selfcrag keeps what lasts: `SELFCRAG_HOME` (default: the user's data directory), holding the SQLite
database of threads, reviews and run records, and the cache of the built sample index. `SELFCRAG_DATABASE_URL`
(`postgresql://...`) moves the database to PostgreSQL; `SELFCRAG_CACHE_DIR` moves only the cache."""

from __future__ import annotations

import os
import sys
from pathlib import Path

DATABASE_FILE = "selfcrag.db"


def user_data_dir() -> Path:
    """The platform's place for an application's data (no dependency for three cases)."""
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def home_dir() -> Path:
    """`SELFCRAG_HOME`, else `<user data dir>/selfcrag` (~/.local/share/selfcrag on Linux)."""
    configured = os.environ.get("SELFCRAG_HOME", "").strip()
    return Path(configured).expanduser() if configured else user_data_dir() / "selfcrag"


def cache_dir() -> Path:
    """The built sample index is kept here: `SELFCRAG_CACHE_DIR`, else `<home>/cache`."""
    configured = os.environ.get("SELFCRAG_CACHE_DIR", "").strip()
    return Path(configured).expanduser() if configured else home_dir() / "cache"


def database_url() -> str:
    """`SELFCRAG_DATABASE_URL` (postgresql://... or sqlite:///path), else the SQLite file in the home."""
    configured = os.environ.get("SELFCRAG_DATABASE_URL", "").strip()
    return configured or f"sqlite:///{home_dir() / DATABASE_FILE}"


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def sqlite_path(url: str) -> Path:
    """The file of a `sqlite:///...` URL (a bare path is taken as one too)."""
    return Path(url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url).expanduser()


def describe(url: str) -> str:
    """The database for a message, without a password."""
    if is_postgres(url):
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        return f"postgresql://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"
    return str(sqlite_path(url))
