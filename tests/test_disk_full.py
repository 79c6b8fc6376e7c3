"""A full disk: no truncated file, one line naming the file and the space left,
and the run directory resumes to the uninterrupted run's metrics.

The disk fills during round 2 of a run checkpointing every round, either for
real (a small tmpfs filled to its last byte by another file; needs root, skipped
otherwise) or simulated (every rename of ``rayfl.rundir.atomic`` fails with ENOSPC,
which every file a run writes goes through).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import rayfl
import rayfl.rundir.atomic
from rayfl.rundir.atomic import DiskFullError, atomic_write, disk_full
from rayfl.rundir.status import RunFailed, terminal_status

BASE = {
    "name": "full",
    "rounds": 4,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
    "privacy": {"mechanism": "gaussian", "clip_norm": 1.0, "noise_multiplier": 0.5},
    "ray": {"num_cpus": 2, "clients_per_actor": 2},
    "output": {"progress": False, "plots": False, "checkpoint_every": 1},
}
FULL_AT = 2  # the disk fills while round 2 runs: its rows cannot be written


def _enospc(path: str = "") -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


# --------------------------------------------------------------------------
# atomic_write and the summary fallback


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    # Arrange
    target = tmp_path / "summary.json"
    target.write_text('{"status": "completed"}')

    def half_then_full(tmp: Path) -> None:
        tmp.write_text('{"sta')  # part of the new content, then the disk is full
        raise _enospc(str(tmp))

    # Act
    with pytest.raises(DiskFullError) as error:
        atomic_write(target, half_then_full)
    # Assert: one line naming the file and the space left; old content intact
    text = str(error.value)
    assert "\n" not in text
    assert text.startswith(f"no space left on device for {target} (")
    assert " free on " in text
    assert error.value.errno == errno.ENOSPC
    assert target.read_text() == '{"status": "completed"}'
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_pyarrow_disk_full_is_recognised_without_errno(tmp_path):
    # pyarrow raises an OSError whose errno is unset; its text says ENOSPC
    error = OSError("Error writing bytes to file. Detail: [errno 28] No space left")
    assert isinstance(disk_full(error, tmp_path / "m.parquet"), DiskFullError)
    assert disk_full(OSError(errno.EACCES, "denied"), tmp_path) is None
    assert disk_full(ValueError("No space left on device"), tmp_path) is None


class _FullOs:
    """``os`` for ``rayfl.rundir.atomic`` on a full disk: every rename fails, as the
    write before it would, leaving an empty temporary file."""

    def __getattr__(self, name):
        return getattr(os, name)

    @staticmethod
    def replace(src, dst):
        Path(src).write_bytes(b"")
        raise _enospc(str(src))


@pytest.fixture
def full_disk(monkeypatch):
    """Make every atomic write in this process fail with ENOSPC."""
    monkeypatch.setattr(rayfl.rundir.atomic, "os", _FullOs())


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_a_summary_that_cannot_be_written_is_not_truncated(tmp_path, full_disk):
    # Arrange: an earlier attempt's summary; the new one cannot be written at all
    (tmp_path / "summary.json").write_text('{"status": "interrupted", "x": 1}')

    def write_summary(progress):
        atomic_write(tmp_path / "summary.json", lambda p: p.write_text("{}"))

    # Act
    with (
        pytest.raises(RunFailed) as info,
        terminal_status(tmp_path, write_summary) as progress,
    ):
        progress.round = 3
        raise DiskFullError(tmp_path / "checkpoint" / "state.json", 0, Path("/"))
    # Assert: the old summary is whole, nothing is empty, the message says so
    assert json.loads((tmp_path / "summary.json").read_text())["x"] == 1
    assert all(p.stat().st_size > 0 for p in _files(tmp_path))
    assert not (tmp_path / ".rayfl-reserve").exists()
    lines = str(info.value).splitlines()
    assert lines[0].startswith("run failed in round 3: DiskFullError: no space left")
    assert any(line.startswith("summary.json not written") for line in lines)


def test_the_ballast_makes_room_for_the_status(tmp_path):
    # The disk is full only until the 64 KiB ballast file is removed
    reserve = tmp_path / ".rayfl-reserve"

    def write_summary(progress):  # the full summary is too big for the room
        raise _enospc(str(tmp_path / "metrics.parquet"))

    with (
        pytest.raises(RunFailed),
        terminal_status(tmp_path, write_summary) as progress,
    ):
        assert reserve.stat().st_size == 64 * 1024
        progress.round = 1
        raise _enospc(str(tmp_path / "checkpoint" / "arrays-2.npz"))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert summary["error"]["round"] == 1
    assert summary["error"]["traceback"] == "error.txt"
    assert "No space left" in summary["summary_error"]
    assert not reserve.exists()


# --------------------------------------------------------------------------
# A run whose disk fills up


def _mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")


def _fill(directory: Path) -> None:
    """Fill ``directory``'s filesystem to its last byte with ``filler``."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (2**20, 2**12, 1):
            try:
                while True:
                    os.write(fd, bytes(chunk))
            except OSError as error:
                assert error.errno == errno.ENOSPC
    finally:
        os.close(fd)


class _Disk:
    """A disk that fills during round ``FULL_AT``; ``free()`` frees it."""

    def __init__(self, kind: str, root: Path, monkeypatch) -> None:
        self.kind, self.root, self.monkeypatch = kind, root, monkeypatch
        if kind == "tmpfs":
            _mount_tmpfs(root, "16m")
        else:
            root.mkdir()

    def fill(self) -> None:
        if self.kind == "tmpfs":
            _fill(self.root)
        else:
            self.monkeypatch.setattr(rayfl.rundir.atomic, "os", _FullOs())

    def free(self) -> None:
        if self.kind == "tmpfs":
            (self.root / "filler").unlink()
        else:
            self.monkeypatch.setattr(rayfl.rundir.atomic, "os", os)

    def close(self) -> None:
        if self.kind == "tmpfs":
            subprocess.run(["umount", "-l", str(self.root)], check=False)


@pytest.fixture(scope="module")
def reference(ray_session, tmp_path_factory):
    """The uninterrupted run's metrics."""
    out = tmp_path_factory.mktemp("reference")
    return rayfl.run(BASE, {"output.dir": str(out)}).metrics


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("tmpfs", marks=pytest.mark.slow),
        pytest.param("simulated", marks=pytest.mark.slow),
    ],
)
def test_a_full_disk_mid_run_is_one_line_and_resumes_bit_identical(
    kind, reference, tmp_path, monkeypatch, capsys
):
    from rayfl.cli import main
    from rayfl.engine import Engine

    # Arrange: the run's disk fills while round FULL_AT runs
    disk = _Disk(kind, tmp_path / "disk", monkeypatch)
    try:
        run_round = Engine.run_round

        def filling(self, t, *args, **kwargs):
            result = run_round(self, t, *args, **kwargs)
            if t == FULL_AT:
                disk.fill()
            return result

        monkeypatch.setattr(Engine, "run_round", filling)
        cfg_path = tmp_path / "cfg.yaml"
        cfg_path.write_text(yaml.safe_dump(BASE))
        # Act
        code = main(["run", str(cfg_path), f"output.dir={disk.root}"])
        err = capsys.readouterr().err
        # Assert: exit 1; the first line names the file and the space left
        assert code == 1, err
        run_dir = next(p for p in disk.root.iterdir() if p.is_dir())
        err = err[err.index("rayfl: run failed") :]  # after Ray's worker logs
        lines = err.strip().splitlines()
        assert "Traceback" not in err and len(lines) <= 8, err
        # the round's first file: its streamed rows (rayfl.rundir.stream)
        part = run_dir / "metrics.parts" / f"round-{FULL_AT:09d}.parquet"
        assert lines[0].startswith(
            f"rayfl: run failed in round {FULL_AT}: DiskFullError: no space left "
            f"on device for {part} ("
        ), err
        assert " free on " in lines[0]
        assert f"rayfl resume {run_dir} (from round {FULL_AT})" in err
        # no empty or temporary file; the last checkpoint is whole
        files = _files(run_dir)
        assert all(p.stat().st_size > 0 for p in files), files
        assert not [p for p in files if p.name.startswith(".")], files
        if (run_dir / "summary.json").exists():  # when the ballast made room
            summary = json.loads((run_dir / "summary.json").read_text())
            assert summary["status"] == "failed"
            assert summary["error"]["type"] == "DiskFullError"
            assert summary["error"]["resume_from"] == FULL_AT
        round_json = json.loads((run_dir / "checkpoint" / "round.json").read_text())
        assert round_json["next_round"] == FULL_AT
        # Act: free the space, resume
        disk.free()
        monkeypatch.setattr(Engine, "run_round", run_round)
        assert main(["resume", str(run_dir)]) == 0
        # Assert: bit-identical to the uninterrupted run
        pd.testing.assert_frame_equal(
            pd.read_parquet(run_dir / "metrics.parquet"), reference
        )
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "completed"
    finally:
        disk.close()


def test_parquet_on_a_full_tmpfs_is_a_disk_full_error(tmp_path):
    # pyarrow's own writer on a real full filesystem (root only)
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "1m")
    try:
        _fill(disk)
        table = pa.table({"x": list(range(100_000))})
        with pytest.raises(DiskFullError, match="m.parquet"):
            atomic_write(disk / "m.parquet", lambda p: pq.write_table(table, p))
        assert [p.name for p in disk.iterdir()] == ["filler"]
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_an_atomic_write_makes_a_file_others_can_read(tmp_path):
    # mkstemp makes 0600 files; a run's results keep the usual mode (umask)
    umask = os.umask(0o022)
    os.umask(umask)
    rayfl.rundir.atomic.atomic_write(tmp_path / "x.csv", lambda p: p.write_text("a\n"))
    assert (tmp_path / "x.csv").stat().st_mode & 0o777 == 0o666 & ~umask
