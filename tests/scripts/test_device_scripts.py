"""scripts/device/: hire_device.py receive (the parts of the encoder's wheel gather over calls; a wheel whose
joined parts are not the staged one is refused before anything is installed; hire is installed and imported in the
first call), run.sh (a command is not run before everything has come) and experiment.sh (its cells stop cleanly on
time and their records come back), with stand-ins for the machine's commands (no GPU, no network)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from paths import SCRIPTS

DEVICE = SCRIPTS / "device"
SCRIPT = DEVICE / "hire_device.py"


def checkout(tmp_path: Path, wheel: bytes, parts: list[bytes], staged_sha: str | None = None) -> Path:
    """A checkout holding the script and a staged .device/ with ``parts`` of ``wheel``."""
    root = tmp_path / "checkout"
    (root / "scripts" / "device").mkdir(parents=True)
    for script in DEVICE.iterdir():
        if script.is_file():
            shutil.copy(script, root / "scripts" / "device")
    device = root / ".device"
    names = [f"enc-{k}" for k in range(1, len(parts) + 1)]
    for name, blob in zip(names, parts, strict=True):
        (device / name).mkdir(parents=True)
        (device / name / f"x.whl.{name}").write_bytes(blob)
    (device / "wheels").mkdir(parents=True)
    manifest = {"encoder_wheel": "x.whl", "sha256": staged_sha or hashlib.sha256(wheel).hexdigest(),
                "parts": names, "data": []}
    (device / "manifest.json").write_text(json.dumps(manifest))
    return root


def receive(root: Path, there: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(root / "scripts" / "device" / "hire_device.py"), "receive"],
                          capture_output=True, text=True, env={**os.environ, "HIRE_DEVICE_DIR": str(there)})


def test_parts_gather_over_calls_until_every_one_has_come(tmp_path):
    wheel = b"0123456789" * 10
    root = checkout(tmp_path, wheel, [wheel[:60], wheel[60:]])
    shutil.rmtree(root / ".device" / "enc-2")  # a call that carries the first part only
    shutil.rmtree(root / ".device" / "wheels")
    there = tmp_path / "there"
    first = receive(root, there)
    assert first.returncode == 3, first.stderr
    assert "have encoder parts enc-1 of 2 and no wheels" in first.stdout
    assert (there / "enc-1").is_dir() and not (there / "site").exists()


def test_joined_parts_that_are_not_the_staged_wheel_are_refused(tmp_path):
    wheel = b"0123456789" * 10
    root = checkout(tmp_path, wheel, [wheel[:60], b"corrupted" + wheel[69:]])
    there = tmp_path / "there"
    result = receive(root, there)
    assert result.returncode == 2
    assert "sha256 is not the staged wheel's" in result.stderr and "Traceback" not in result.stderr
    assert not (there / "site").exists()  # nothing installed


def test_a_call_without_the_manifest_is_one_line(tmp_path):
    root = checkout(tmp_path, b"w", [b"w"])
    (root / ".device" / "manifest.json").unlink()
    result = receive(root, tmp_path / "there")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "carry .device/manifest.json" in result.stderr


def machine_path(tmp_path: Path, stand_ins: dict[str, str]) -> dict[str, str]:
    """An environment whose PATH finds ``stand_ins`` (name -> Python source) first, then this Python as python3."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, source in {**stand_ins, "python3": None}.items():
        path = bin_dir / name
        if source is None:
            path.symlink_to(sys.executable)
        else:
            path.write_text(f"#!{sys.executable}\n{source}")
            path.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_run_sh_runs_no_command_before_everything_has_come(tmp_path):
    wheel = b"0123456789" * 10
    root = checkout(tmp_path, wheel, [wheel[:60], wheel[60:]])
    shutil.rmtree(root / ".device" / "enc-2")
    shutil.rmtree(root / ".device" / "wheels")
    env = {**machine_path(tmp_path, {}), "HIRE_DEVICE_DIR": str(tmp_path / "there")}
    run = [str(root / "scripts" / "device" / "run.sh")]
    gathering = subprocess.run(["bash", *run], capture_output=True, text=True, env=env)
    assert gathering.returncode == 0 and "have encoder parts enc-1 of 2" in gathering.stdout
    early = subprocess.run(["bash", *run, "touch", str(tmp_path / "ran")], capture_output=True, text=True, env=env)
    assert early.returncode == 3 and "was not run" in early.stderr and not (tmp_path / "ran").exists()


@pytest.mark.slow
def test_the_first_call_installs_the_checkout_and_imports_hire_there(tmp_path):
    """The wheels and the checkout are installed, and hire imported, as soon as they have come; a checkout that does
    not import there is one message in that call, and nothing half-installed stays."""
    wheel = b"0123456789" * 10
    root = checkout(tmp_path, wheel, [wheel[:60], wheel[60:]])
    shutil.rmtree(root / ".device" / "enc-2")
    (root / "pyproject.toml").write_text('[project]\nname = "hire"\nversion = "0.0.1"\n[project.scripts]\n'
                                         'hire = "hire.cli:main"\n[tool.setuptools]\npackages = ["hire"]\n')
    (root / "hire").mkdir()
    (root / "hire" / "__init__.py").write_text('__version__ = "0.0.1"\n')
    (root / "hire" / "cli.py").write_text("")
    there = tmp_path / "there"
    first = receive(root, there)
    assert first.returncode == 3, first.stderr[-2000:]
    assert "installed the wheels and this checkout" in first.stdout and "hire 0.0.1" in first.stdout
    assert (there / "site" / "hire" / "cli.py").is_file() and (there / "site" / ".base").is_file()

    encoder = tmp_path / "encoder-project"  # a wheel with a command of its own, as the encoder's has
    (encoder / "enc").mkdir(parents=True)
    (encoder / "enc" / "__init__.py").write_text("def main():\n    pass\n")
    (encoder / "pyproject.toml").write_text('[project]\nname = "enc"\nversion = "1"\n[project.scripts]\n'
                                            'enc = "enc:main"\n[tool.setuptools]\npackages = ["enc"]\n')
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "wheel"), str(encoder)], check=True)
    built = next((tmp_path / "wheel").glob("*.whl"))
    blob = built.read_bytes()
    manifest = json.loads((root / ".device" / "manifest.json").read_text())
    manifest.update(encoder_wheel=built.name, sha256=hashlib.sha256(blob).hexdigest())
    (root / ".device" / "manifest.json").write_text(json.dumps(manifest))
    shutil.rmtree(root / ".device" / "enc-1")
    (root / ".device" / "enc-2").mkdir()
    (root / ".device" / "enc-2" / "x.part2").write_bytes(blob[10:])
    (there / "enc-1" / "x.whl.enc-1").write_bytes(blob[:10])  # what the first call left there
    last = receive(root, there)
    assert last.returncode == 0, last.stderr[-2000:]
    assert (there / "encoder-site" / "enc" / "__init__.py").is_file() and (there / "site" / ".installed").is_file()
    assert (there / "site" / "bin" / "hire").is_file()  # the encoder's install left hire's command in place

    (root / "hire" / "cli.py").write_text("raise ImportError('made for another Python')\n")
    broken = receive(root, tmp_path / "elsewhere")
    assert broken.returncode == 2 and "hire does not import on this machine" in broken.stderr
    assert "made for another Python" in broken.stderr and not (tmp_path / "elsewhere" / "site").exists()


HIRE_STAND_IN = """import pathlib, sys, time
if sys.argv[1:3] == ["experiment", "run"]:  # records one cell, then trains until it is stopped
    records = pathlib.Path("experiments/demo/records")
    records.mkdir(parents=True, exist_ok=True)
    (records / "cell-1.json").write_text("{}")
    try:
        while True:
            time.sleep(0.05)
    except KeyboardInterrupt:
        pathlib.Path("stopped").write_text("cleanly")
        sys.exit(130)
print("1 cell recorded")
"""


def test_experiment_sh_stops_its_cells_cleanly_before_the_deadline_and_packs_them(tmp_path):
    root = checkout(tmp_path, b"w", [b"w"])
    (root / "demo.yaml").write_text("name: demo\n")
    out = tmp_path / "out"
    env = {**machine_path(tmp_path, {"hire": HIRE_STAND_IN}), "OUT": str(out),
           "HIRE_DEVICE_DEADLINE": str(int(time.time()) + 93)}  # 90 s are kept for stopping and packing
    start = time.monotonic()
    done = subprocess.run(["bash", str(root / "scripts" / "device" / "experiment.sh"), "demo.yaml", "5", "2"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - start < 40  # stopped on SIGINT, not killed after the grace period
    assert (root / "stopped").read_text() == "cleanly"
    assert "stopping at the time limit" in (out / "demo.log").read_text()
    with tarfile.open(out / "demo.tar.gz") as archive:
        assert "experiments/demo/records/cell-1.json" in archive.getnames()
    assert not (out / "demo-records.tar.gz").exists() and "1 cell recorded" in (out / "demo.log").read_text()
    no_out = subprocess.run(["bash", str(root / "scripts" / "device" / "experiment.sh"), "demo.yaml", "5", "2"],
                            capture_output=True, text=True, env={k: v for k, v in env.items() if k != "OUT"})
    assert no_out.returncode == 2 and "OUT is not set" in no_out.stderr
