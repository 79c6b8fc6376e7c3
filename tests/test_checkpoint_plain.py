"""Checkpoints are plain data (JSON + npz): nothing from a run directory is unpickled."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rayfl
from rayfl.rundir.checkpoint import (
    CheckpointFormatError,
    decode_tree,
    encode_tree,
    load_checkpoint,
    plain_attributes,
    restore_attributes,
    save_checkpoint,
)
from rayfl.schedule import Schedule
from tests.configs import DIGITS_8


class _Boom:
    """Unpickling this writes ``marker``: proof that a pickle was loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "pwned"))


def _roundtrip(state):
    arrays: dict = {}
    tree = encode_tree(state, arrays)
    text = json.dumps(tree)  # must be JSON-able
    return decode_tree(json.loads(text), arrays)


def test_tree_roundtrip_keeps_values_and_types():
    rng = np.random.default_rng(7)
    rng.normal(size=3)
    state = {
        "global": np.arange(5, dtype=np.float32) / 3,
        "clients": {3: {"personal": np.ones((2, 2)), "local_updates": 4}},
        "f64": np.float64(0.1),
        "i64": np.int64(-5),
        "flags": np.array([True, False]),
        "floats": [math.nan, math.inf, -0.0, 1e-310, 2**70],
        "tuple": (1, "a", None),
        "~tilde": "kept",
        "rng": rng,
        "schedule": Schedule(np.array([1, 4], np.int64)),
    }
    back = _roundtrip(state)
    assert back["global"].dtype == np.float32
    assert np.array_equal(back["global"], state["global"])
    assert list(back["clients"]) == [3] and back["clients"][3]["local_updates"] == 4
    assert type(back["f64"]) is np.float64 and back["f64"] == np.float64(0.1)
    assert type(back["i64"]) is np.int64 and back["flags"].dtype == np.bool_
    f = back["floats"]
    assert math.isnan(f[0]) and f[1] == math.inf and math.copysign(1, f[2]) == -1
    assert f[3] == 1e-310 and f[4] == 2**70
    assert back["tuple"] == (1, "a", None) and back["~tilde"] == "kept"
    # the generator continues the same stream
    assert np.array_equal(back["rng"].normal(size=4), rng.normal(size=4))
    assert isinstance(back["schedule"], Schedule)
    assert np.array_equal(back["schedule"].clients, [1, 4])


def test_non_plain_objects_are_refused_with_their_path():
    with pytest.raises(TypeError, match=r"state\.clients\.2: .*_Boom cannot be"):
        encode_tree({"clients": {2: _Boom(Path("x"))}}, {})
    with pytest.raises(TypeError, match="object arrays"):
        encode_tree({"a": np.array([object()])}, {})


def test_plain_attributes_keep_state_and_skip_wiring():
    class Policy:
        def __init__(self):
            self.queue = np.zeros(3)
            self.np_random = np.random.default_rng(1)
            self.space = object()  # rebuilt from the config on resume

    a = Policy()
    a.queue += 2
    a.np_random.random()
    saved = _roundtrip(plain_attributes(a))
    assert set(saved) == {"queue", "np_random"}
    b = Policy()
    restore_attributes(b, saved)
    assert (
        np.array_equal(b.queue, a.queue)
        and b.np_random.random() == a.np_random.random()
    )


def test_crafted_pickle_in_a_run_dir_is_never_loaded(tmp_path):
    marker = tmp_path / "marker"
    folder = tmp_path / "run" / "checkpoint"
    folder.mkdir(parents=True)
    (folder / "state.pkl").write_bytes(pickle.dumps({"format": 1, "x": _Boom(marker)}))
    (folder / "round.json").write_text('{"next_round": 2}')
    # an old-format directory: a clear error, the pickle untouched
    with pytest.raises(CheckpointFormatError, match="pickled checkpoint of an older"):
        rayfl.resume(tmp_path / "run")
    assert not marker.exists()
    # a current checkpoint beside a planted state.pkl: the pickle is ignored
    save_checkpoint(tmp_path / "run", {"next_round": 2, "w": np.ones(2)})
    assert np.array_equal(load_checkpoint(tmp_path / "run")["w"], np.ones(2))
    assert not marker.exists()


def test_pickled_arrays_in_the_npz_are_refused(tmp_path):
    marker = tmp_path / "marker"
    save_checkpoint(tmp_path, {"next_round": 3, "w": np.ones(2)})
    npz = tmp_path / "checkpoint" / "arrays-3.npz"
    bad = np.empty(1, dtype=object)
    bad[0] = _Boom(marker)
    with open(npz, "wb") as f:
        np.savez(f, a0=bad)  # an object array is stored pickled
    with pytest.raises(ValueError, match="allow_pickle"):
        load_checkpoint(tmp_path)
    assert not marker.exists()


def test_foreign_classes_and_formats_are_refused(tmp_path):
    save_checkpoint(tmp_path, {"next_round": 1})
    path = tmp_path / "checkpoint" / "state.json"
    doc = json.loads(path.read_text())
    doc["state"]["evil"] = {"~dataclass": "os:system", "fields": {}}
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointFormatError, match="foreign class 'os:system'"):
        load_checkpoint(tmp_path)
    doc["format"] = 1
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointFormatError, match="format 1 not supported"):
        load_checkpoint(tmp_path)


def test_a_new_checkpoint_replaces_the_old_arrays(tmp_path):
    save_checkpoint(tmp_path, {"next_round": 2, "w": np.zeros(3)})
    save_checkpoint(tmp_path, {"next_round": 4, "w": np.ones(3)})
    files = sorted(p.name for p in (tmp_path / "checkpoint").iterdir())
    assert files == ["arrays-4.npz", "round.json", "state.json"]
    assert load_checkpoint(tmp_path)["w"].tolist() == [1.0, 1.0, 1.0]


FLAT = {
    "name": "ckpt",
    "rounds": 4,
    "eval_every": 2,
    "data": DIGITS_8,
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "local_steps": 3, "batch_size": 16, "lr": 0.1},
    "output": {"progress": False, "plots": False, "checkpoint_every": 2},
}
RESUMED = {
    "env_policy": {
        **FLAT,
        "scheduler": {"policy": "proportional_fair"},
        "wireless": {"num_subchannels": 3, "effects": "bit_flip"},
    },
    "hierarchical": {
        **FLAT,
        "topology": {
            "kind": "hierarchical",
            "num_edges": 2,
            "tau": 3,
            "local_period": 3,
            "dp": {"enabled": False, "grad_bound": None},
            "lr": {"mode": "constant"},
        },
        "scheduler": {"policy": "round_robin"},
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(RESUMED))
def test_resume_from_a_plain_checkpoint_is_bit_identical(ray_session, tmp_path, kind):
    # Arrange: a finished run keeps its round-2 checkpoint
    first = rayfl.run(RESUMED[kind], {"output.dir": str(tmp_path)})
    assert not (first.run_dir / "checkpoint" / "state.pkl").exists()
    # Act: resume rounds 2-3 from it
    again = rayfl.resume(first.run_dir)
    # Assert
    pd.testing.assert_frame_equal(first.metrics, again.metrics)


@pytest.mark.slow
def test_a_checkpoint_of_the_former_builtin_rule_resumes(ray_session, tmp_path):
    # Arrange: round robin, 3 of 8 clients; rounds 0-1 took {0,1,2}, {3,4,5}
    cfg = {**FLAT, "scheduler": {"policy": "round_robin", "clients_per_round": 3}}
    first = rayfl.run(cfg, {"output.dir": str(tmp_path)})
    state = load_checkpoint(first.run_dir)
    assert state["deciders"][0]["cursor"] == 6
    state["deciders"] = [{"cursor": 6}]  # what the former built-in rule saved
    save_checkpoint(first.run_dir, state)
    # Act
    again = rayfl.resume(first.run_dir)
    # Assert: round 2 takes {6,7,0}, and the metrics equal the uninterrupted run
    scheduled = again.metrics[again.metrics.scheduled & (again.metrics["round"] == 2)]
    assert sorted(scheduled["client"]) == [0, 6, 7]
    pd.testing.assert_frame_equal(first.metrics, again.metrics)
