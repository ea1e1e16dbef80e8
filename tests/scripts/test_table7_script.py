"""scripts/table7.py: records from `hire features` results, and the tables made from the records alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from paths import SCRIPTS

sys.path.insert(0, str(SCRIPTS))
import table7


def fake_seed(folder: Path, seed: int, f1: dict[str, float]) -> None:
    for row, dev in f1.items():
        run = folder / row
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"encoder": "tiny", "settings": {"seed": seed}}))
        (run / "metrics.json").write_text(json.dumps({
            "dev": {"f1": dev}, "test": {"f1": dev - 0.05}, "best_epoch": 1 if seed == 3 else 2, "epochs_run": 2,
            "train_seconds": 10.0 * seed, "machine": {"cpu": "test"}}))
        curve = [dev - 0.01 * seed, dev]  # dev F1 moves by `seed` points from epoch 1 to 2
        (run / "epochs.jsonl").write_text("".join(json.dumps({"epoch": e, "train_loss": 0.5, "dev": {"f1": f}}) + "\n"
                                                  for e, f in enumerate(curve, 1)))


def test_collect_then_report_from_records_alone(tmp_path: Path) -> None:
    fake_seed(tmp_path / "runs" / "seed1", 1, {"last": 0.80, "concat-last-4": 0.84})
    fake_seed(tmp_path / "runs" / "seed2", 2, {"last": 0.82, "concat-last-4": 0.83})
    fake_seed(tmp_path / "runs" / "seed3", 3, {"last": 0.90})
    exp = tmp_path / "exp"
    assert table7.main(["collect", *map(str, sorted((tmp_path / "runs").iterdir())), "--out", str(exp)]) == 0
    assert len(list((exp / "records").glob("*.json"))) == 5
    import shutil

    shutil.rmtree(tmp_path / "runs")  # the report reads the records only
    assert table7.main(["report", str(exp)]) == 0
    rows = {r["row"]: r for r in json.loads((exp / "tables" / "table7.json").read_text())["rows"]}
    assert rows["last"]["dev"]["median"] == pytest.approx(82.0) and rows["last"]["dev"]["n"] == 3
    assert rows["concat-last-4"]["test"]["median"] == pytest.approx(78.5)
    assert rows["last"]["paper"] == 94.9
    assert rows["last"]["best_epochs"] == [2, 2, 1] and rows["last"]["epochs_run"] == [2, 2, 2]
    assert rows["last"]["largest_last_epoch_move"] == pytest.approx(3.0)
    assert rows["concat-last-4"]["largest_last_epoch_move"] == pytest.approx(2.0)
    first = (exp / "tables" / "table7.md").read_bytes(), (exp / "report.md").read_bytes()
    assert "| frozen features: last | 3 | 82.0 [80.0, 90.0] | 77.0 [75.0, 85.0] | 20 | 94.9 |" in first[0].decode()
    assert table7.main(["report", str(exp)]) == 0
    assert ((exp / "tables" / "table7.md").read_bytes(), (exp / "report.md").read_bytes()) == first


def test_report_without_records_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "records").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        table7.main(["report", str(tmp_path)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_collect_from_a_missing_or_unfinished_folder_writes_nothing(tmp_path: Path, capsys) -> None:
    (tmp_path / "running").mkdir()
    for folder in ("nowhere", "running"):
        with pytest.raises(SystemExit) as exit_info:
            table7.main(["collect", str(tmp_path / folder), "--out", str(tmp_path / "exp")])
        assert exit_info.value.code == 2 and capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "exp").exists()
