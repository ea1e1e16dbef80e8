"""Files the lab writes and hashes: written whole or not at all, and hashed by content.

:func:`atomic_write` and :func:`write_files` write through a temporary file and a rename, so a killed command
never leaves half a file under a valid name, and what an earlier run wrote stays until its replacement is whole.
:func:`file_sha256` is the one file hash of the lab (an encoder's fingerprint, the encoder installer's checks);
:func:`sha256_json` hashes a JSON-able value by its canonical text (keys sorted).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

CHUNK = 1 << 22  # bytes read at a time while hashing a file (4 MiB)


def file_sha256(path: str | Path, chunk: int = CHUNK) -> str:
    """The SHA-256 of a file's content (hex), read ``chunk`` bytes at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_json(value: Any) -> str:
    """The SHA-256 of ``value``'s JSON text, keys sorted (the same value gives the same hash)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """``write(file object)`` into a temporary file beside ``path``, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_files(out: Path, files: dict[str, str]) -> None:
    """Each ``name -> text`` written under ``out`` through a temporary file and a rename: a kill never leaves
    half a file, and what an earlier run wrote stays until its replacement is whole."""
    for name, text in files.items():
        part = out / f"{name}.part"
        part.write_text(text)
        os.replace(part, out / name)
