import json

import pandas as pd
import pytest

from rayfl.rundir.results import RunLog, atomic_write, load_run, make_run_dir, safe_name


def _no_constants(name):
    raise ValueError(f"summary.json holds the non-JSON constant {name}")


def test_run_log_round_trip(tmp_path):
    run_dir = make_run_dir(tmp_path, "x")
    log = RunLog(run_dir)
    log.write_config({"a": 1})
    log.client_rows = [{"round": 0, "client": c, "test_acc": 0.5} for c in range(3)]
    log.round_rows = [{"round": 0, "global_acc": 0.5}]
    log.flush({"status": "completed", "acc": float("nan"), "eps": [1.0, float("inf")]})
    loaded = load_run(run_dir)
    assert loaded.summary["status"] == "completed"
    assert loaded.summary["acc"] is None and loaded.summary["eps"] == [1.0, None]
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


def test_summary_is_strict_json(tmp_path):
    log = RunLog(make_run_dir(tmp_path, "x"))
    log.flush({"a": float("nan"), "b": {"c": float("-inf")}, "d": (1.5, 2)})
    text = (log.run_dir / "summary.json").read_text()
    doc = json.loads(text, parse_constant=_no_constants)
    assert doc == {"a": None, "b": {"c": None}, "d": [1.5, 2]}


def test_old_finished_summaries_read_as_completed(tmp_path):
    log = RunLog(make_run_dir(tmp_path, "old"))
    log.flush({"status": "finished"})  # the word before "completed"
    assert load_run(log.run_dir).summary["status"] == "completed"


@pytest.mark.parametrize(
    "name", ["../x", "../../escape", "/abs/path", "a/../../b", "..", ".", "", "\\x\n"]
)
def test_run_dir_stays_inside_output_dir(tmp_path, name):
    root = tmp_path / "runs"
    run_dir = make_run_dir(root, name)
    assert run_dir.parent == root
    assert run_dir.resolve().parent == root.resolve()
    assert "/" not in safe_name(name) and not safe_name(name).startswith(".")
