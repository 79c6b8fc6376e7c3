"""rayfl.Session: a warm second run reuses the actors and equals a cold run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rayfl
from rayfl.config import load_config
from rayfl.notebook import Session
from tests.configs import WPFL_ALGORITHM, WPFL_PRIVACY

#: Quickstart-like, small: 6 digits clients on a bit-flipping OFDMA uplink, with
#: WPFL's per-client state (personal models) and DP noise, so a reused engine
#: that kept any state of the last run would differ from a cold one.
WARM: dict = {
    "name": "warm",
    "seed": 1,
    "rounds": 2,
    "eval_every": 1,
    "data": {
        "dataset": "digits",
        "num_clients": 6,
        "partition": "dirichlet",
        "alpha": 0.5,
        "min_partition_size": 20,
    },
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": WPFL_ALGORITHM,
    "privacy": WPFL_PRIVACY,
    "compression": {"quantize_bits": 8},
    "scheduler": {"policy": "random"},
    "wireless": {"num_subchannels": 3, "effects": "bit_flip"},
    "ray": {"num_cpus": 2, "clients_per_actor": 3},
    "output": {"progress": False, "plots": False},
}
#: The second run: only warm fields change (policy, rounds, eval_every, name).
SECOND = {
    "name": "warm-second",
    "rounds": 3,
    "eval_every": 2,
    "scheduler.policy": "round_robin",
}


def _timeless(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without its wall-clock column (it differs between any two runs)."""
    return frame.drop(columns=["round_time_s"])


def test_a_warm_second_run_reuses_the_actors_and_equals_a_cold_run(
    ray_session, tmp_path, capsys
):
    # Arrange
    out = {"output.dir": str(tmp_path)}
    with Session() as session:
        session.run(WARM, out)
        first_actors = list(session._engine.actors)
        # Act
        warm = session.run(WARM, {**out, **SECOND})
        reused = session.last_reused
        same_actors = list(session._engine.actors) == first_actors
    cold = rayfl.run(WARM, {**out, **SECOND})
    # Assert
    assert reused and same_actors
    assert "reusing the live actors" in capsys.readouterr().err
    assert len(warm.rounds) == 3
    pd.testing.assert_frame_equal(warm.metrics, cold.metrics)
    pd.testing.assert_frame_equal(_timeless(warm.rounds), _timeless(cold.rounds))


class _LiveEngine:
    """What :meth:`Session.reuse_blocker` reads of a live engine (no Ray)."""

    topology = "star"

    def __init__(self, config):
        self.config = config
        self.num_train = np.full(6, 200, dtype=np.int64)
        self.dim = 100


def _session_with(config) -> Session:
    session = Session()
    session._engine = _LiveEngine(load_config(config))
    session._completed = True
    return session


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"seed": 2}, "seed changed (1 -> 2; it draws the data)"),
        ({"data.num_clients": 8}, "data changed"),
        ({"algorithm.lr": 0.2, "model.hidden": [8]}, "model, algorithm changed"),
        ({"privacy.max_uploads": 3}, "privacy changed"),
        ({"ray.clients_per_actor": 2}, "ray changed"),
    ],
    ids=["seed", "data", "model-algorithm", "privacy", "ray"],
)
def test_a_change_that_needs_new_actors_is_named(change, reason):
    session = _session_with(WARM)
    assert session.reuse_blocker(load_config(WARM, change)) == reason


def test_warm_fields_reuse_and_a_failed_run_rebuilds():
    session = _session_with(WARM)
    warm_only = load_config(WARM, SECOND)
    assert session.reuse_blocker(warm_only) is None
    session._completed = False
    assert session.reuse_blocker(warm_only) == "the last run did not complete"
    assert Session().reuse_blocker(warm_only) == "no live engine"


def test_rounds_that_change_the_calibrated_noise_rebuild():
    # Arrange: the accountant calibrates σ for `rounds` releases (no T0 cap)
    dp = {
        "privacy": {
            "mechanism": "gaussian",
            "epsilon": 2.0,
            "delta": 1e-3,
            "clip_norm": 1.0,
        },
        "algorithm": {"kind": "fedavg", "lr": 0.1, "batch_size": 16},
    }
    session = _session_with({**WARM, **dp})
    # Act / Assert
    assert session.reuse_blocker(load_config({**WARM, **dp}, {"rounds": 20})) == (
        "rounds changed the calibrated DP noise"
    )
    assert session.reuse_blocker(load_config({**WARM, **dp}, {"name": "x"})) is None
