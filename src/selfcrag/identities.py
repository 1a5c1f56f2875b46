"""Who may call a selfcrag LangGraph server: bearer tokens in an operator file, stored only as sha256 hashes.

The file (path in SELFCRAG_AUTH_FILE) is JSON: {"tokens": [{"sha256": ..., "identity": "alice", "role": "asker"}]};
an entry may name a `tenant` ("tenant": "acme"): every run of that identity then retrieves only the documents whose
metadata `tenant` is it (the `tenant` run setting, forced by selfcrag/auth.py).
A token is 32 random bytes, so a plain sha256 is enough to keep a stolen file from giving anyone a token: there is
no dictionary to try. `python -m selfcrag.identities add NAME ROLE [--tenant T]` adds one and prints the token, once;
`list` shows who holds tokens, `revoke NAME` removes an identity's tokens and `rotate NAME` replaces them by a new one.
The server re-reads the file when it changes: adding, revoking or rotating a token needs no restart.

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


def _entries(path: Path) -> list[dict[str, str]]:
    return [_entry(h, i) for h, i in _parse(path).items()]


def _save(path: Path, entries: list[dict[str, str]]) -> None:
    """The file written whole (readable by its owner only), never half-written for the server to read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"tokens": entries}, indent=1) + "\n", encoding="utf-8")
    os.chmod(partial, 0o600)
    os.replace(partial, path)


def add(path: Path, name: str, role: str, tenant: str = "") -> str:
    """Add an identity to the file (made if absent, readable by its owner only), scoped to `tenant` when one is
    given; returns the new token."""
    if role not in ROLES:
        raise IdentityError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    if not name.strip():
        raise IdentityError("an identity needs a name")
    entries = _entries(path) if path.exists() else []
    token = secrets.token_urlsafe(32)
    _save(path, [*entries, _entry(hashed(token), Identity(name.strip(), role, tenant.strip()))])
    return token


def listed(path: Path) -> list[str]:
    """One line per token: its identity, role, the first 12 hex digits of its hash (the token is not kept) and its
    tenant, if any."""
    return [f"{e['identity']}\t{e['role']}\t{e['sha256'][:12]}" + (f"\ttenant={e['tenant']}" if e.get("tenant") else "")
            for e in _entries(path)]


def _split(path: Path, name: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(the identity's tokens, every other token); an identity with none is an IdentityError."""
    entries = _entries(path)
    mine = [e for e in entries if e["identity"] == name.strip()]
    if not mine:
        raise IdentityError(f"{path}: no identity {name.strip()!r} (python -m selfcrag.identities list shows them)")
    return mine, [e for e in entries if e["identity"] != name.strip()]


def revoke(path: Path, name: str) -> int:
    """Remove every token of the identity; the server refuses them as soon as it sees the file change. Returns
    how many there were."""
    mine, others = _split(path, name)
    _save(path, others)
    return len(mine)


def rotate(path: Path, name: str) -> str:
    """Replace the identity's tokens by one new token of its role, in one write (the old ones stop working
    when the new one starts); returns the new token. Tokens of several roles are refused: which to keep is the
    operator's choice (revoke, then add)."""
    mine, others = _split(path, name)
    roles = sorted({e["role"] for e in mine}, key=ROLES.index)
    tenants = sorted({e.get("tenant", "") for e in mine})
    if len(roles) > 1 or len(tenants) > 1:
        raise IdentityError(f"{name.strip()!r} holds tokens of several roles or tenants: revoke it and add it "
                            "again with one")
    token = secrets.token_urlsafe(32)
    _save(path, [*others, _entry(hashed(token), Identity(name.strip(), roles[0], tenants[0]))])
    return token


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m selfcrag.identities", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    adding = commands.add_parser("add", help="add an identity and print its token (shown only this once)")
    adding.add_argument("name")
    adding.add_argument("role", choices=ROLES)
    adding.add_argument("--tenant", default="", help="its runs retrieve only documents whose metadata tenant is this")
    commands.add_parser("list", help="print each token's identity, role and hash prefix, one a line")
    revoking = commands.add_parser("revoke", help="remove every token of an identity")
    revoking.add_argument("name")
    rotating = commands.add_parser("rotate", help="replace an identity's tokens by a new one and print it (once)")
    rotating.add_argument("name")
    for command in commands.choices.values():
        command.add_argument("--file", default=os.environ.get(FILE_VARIABLE), help=f"default: ${FILE_VARIABLE}")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.file:
        print(f"error: name the identity file with --file or {FILE_VARIABLE}", file=sys.stderr)
        return 2
    path = Path(args.file)
    try:
        if args.command == "add":
            print(add(path, args.name, args.role, args.tenant))
        elif args.command == "list":
            for line in listed(path):
                print(line)
        elif args.command == "revoke":
            count = revoke(path, args.name)
            print(f"revoked {count} token{'s' if count != 1 else ''} of {args.name.strip()}", file=sys.stderr)
        else:
            print(rotate(path, args.name))
    except IdentityError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
