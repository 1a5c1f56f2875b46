"""Who may call a selfcrag LangGraph server: bearer tokens in an operator file, stored only as sha256 hashes.

The file (path in SELFCRAG_AUTH_FILE) is JSON: {"tokens": [{"sha256": ..., "identity": "alice", "role": "asker"}]};
an entry may name a `tenant` ("tenant": "acme"): every run of that identity then retrieves only the documents whose
metadata `tenant` is it (the `tenant` run setting, forced by selfcrag/auth.py).
A token is 32 random bytes, so a plain sha256 is enough to keep a stolen file from giving anyone a token: there is
no dictionary to try. `python -m selfcrag.identities add NAME ROLE [--tenant T]` adds one and prints the token, once.
The server re-reads the file when it changes: adding or removing a token needs no restart.

Roles, each holding the ones before it: `asker` (asks questions on its own threads), `reviewer` (also reads every
thread and decides answers held for review), `operator` (everything: assistants, crons, the store, thread state).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

from selfcrag.errors import IdentityError

ROLES = ("asker", "reviewer", "operator")
FILE_VARIABLE = "SELFCRAG_AUTH_FILE"


@dataclass(frozen=True)
class Identity:
    name: str
    role: str
    tenant: str = ""  # the documents its runs retrieve (metadata `tenant`); "" = not scoped

    @property
    def permissions(self) -> list[str]:
        """The role and every role below it: a reviewer is an asker too."""
        return list(ROLES[: ROLES.index(self.role) + 1])


def hashed(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _parse(path: Path) -> dict[str, Identity]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IdentityError(f"{path}: no such identity file ({FILE_VARIABLE})") from None
    except (OSError, ValueError) as exc:
        raise IdentityError(f"{path}: not a readable JSON identity file: {exc}") from None
    entries = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise IdentityError(f'{path}: expected {{"tokens": [...]}}')
    found: dict[str, Identity] = {}
    for number, entry in enumerate(entries, 1):
        ok = isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in ("sha256", "identity", "role"))
        if not ok or entry["role"] not in ROLES or len(entry["sha256"]) != 64:
            raise IdentityError(f"{path}: token {number} needs sha256 (64 hex digits), identity and a role of "
                                f"{', '.join(ROLES)}")  # fmt: skip
        if not isinstance(entry.get("tenant", ""), str):
            raise IdentityError(f"{path}: token {number}: tenant must be a string")
        found[entry["sha256"].lower()] = Identity(entry["identity"], entry["role"], entry.get("tenant", "").strip())
    return found


class IdentityFile:
    """The identities of one file, read again whenever its modification time or size changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None
        self._identities: dict[str, Identity] = {}

    def lookup(self, token: str) -> Identity | None:
        try:
            stat = self.path.stat()
        except OSError:
            raise IdentityError(f"{self.path}: no such identity file ({FILE_VARIABLE})") from None
        if self._seen != (stat.st_mtime_ns, stat.st_size):
            self._identities = _parse(self.path)
            self._seen = (stat.st_mtime_ns, stat.st_size)
        return self._identities.get(hashed(token))


def _entry(sha256: str, identity: Identity) -> dict[str, str]:
    entry = {"sha256": sha256, "identity": identity.name, "role": identity.role}
    return entry | ({"tenant": identity.tenant} if identity.tenant else {})


def add(path: Path, name: str, role: str, tenant: str = "") -> str:
    """Add an identity to the file (made if absent, readable by its owner only), scoped to `tenant` when one is
    given; returns the new token."""
    if role not in ROLES:
        raise IdentityError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    if not name.strip():
        raise IdentityError("an identity needs a name")
    data = {"tokens": [_entry(h, i) for h, i in _parse(path).items()]} if path.exists() else {"tokens": []}
    token = secrets.token_urlsafe(32)
    data["tokens"].append(_entry(hashed(token), Identity(name.strip(), role, tenant.strip())))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.chmod(partial, 0o600)
    os.replace(partial, path)  # never a half-written file for the server to read
    return token


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m selfcrag.identities", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    adding = commands.add_parser("add", help="add an identity and print its token (shown only this once)")
    adding.add_argument("name")
    adding.add_argument("role", choices=ROLES)
    adding.add_argument("--tenant", default="", help="its runs retrieve only documents whose metadata tenant is this")
    adding.add_argument("--file", default=os.environ.get(FILE_VARIABLE), help=f"default: ${FILE_VARIABLE}")
    args = parser.parse_args(argv)
    if not args.file:
        print(f"error: name the identity file with --file or {FILE_VARIABLE}", file=sys.stderr)
        return 2
    try:
        print(add(Path(args.file), args.name, args.role, args.tenant))
    except IdentityError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
