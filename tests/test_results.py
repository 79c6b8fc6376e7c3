import pandas as pd
import pytest

from rayfl.results import RunLog, atomic_write, load_run, make_run_dir


def test_run_log_round_trip(tmp_path):
    run_dir = make_run_dir(tmp_path, "x")
    log = RunLog(run_dir)
    log.write_config({"a": 1})
    log.client_rows = [{"round": 0, "client": c, "test_acc": 0.5} for c in range(3)]
    log.round_rows = [{"round": 0, "global_acc": 0.5}]
    log.flush({"status": "finished"})
    loaded = load_run(run_dir)
    assert loaded.summary["status"] == "finished"
    pd.testing.assert_frame_equal(loaded.metrics, pd.DataFrame(log.client_rows))
    assert "global_acc" in loaded.table()


def test_make_run_dir_never_reuses(tmp_path):
    a, b = make_run_dir(tmp_path, "x"), make_run_dir(tmp_path, "x")
    assert a != b and a.is_dir() and b.is_dir()


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "f.txt"

    def boom(path):
        path.write_text("partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, boom)
    assert list(tmp_path.iterdir()) == []


def test_load_run_rejects_unfinished(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a finished"):
        load_run(tmp_path)
