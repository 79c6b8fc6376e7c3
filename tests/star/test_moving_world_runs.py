"""Star runs on Ray in a moving world (issue 48): packing, availability, stragglers.

Every model is on: correlated fading, availability, CPU speeds, the round
deadline, mobility and Gudmundson's shadowing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rayfl
from rayfl.wireless.dynamics import OnOffAvailability

pytestmark = pytest.mark.usefixtures("ray_session")

MOVING = {
    "name": "moving",
    "seed": 2,
    "rounds": 4,
    "data": {
        "dataset": "digits",
        "num_clients": 6,
        "partition": "dirichlet",
        "alpha": 1.0,
        "min_partition_size": 20,
    },
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "local_epochs": 1, "batch_size": 16, "lr": 0.1},
    "scheduler": {"policy": "round_robin"},
    "wireless": {
        "num_subchannels": 4,
        "fading_dynamics": "gauss_markov",
        "speed_mps": 1.5,
        "carrier_hz": 2.4e9,
        "round_duration_s": 0.05,
        "availability": "markov",
        "mean_on_rounds": 3.0,
        "mean_off_rounds": 2.0,
        "cpu_frequency_distribution": "lognormal",
        "cpu_frequency_sigma": 0.8,
        "round_deadline_s": 0.02,
        "mobility": "random_waypoint",
        "mobility_speed_min_mps": 20.0,
        "mobility_speed_max_mps": 40.0,
        "mobility_pause_s": 0.02,
        "shadowing_std_db": 6.0,
        "shadowing_decorrelation_m": 2.0,
    },
    "output": {"progress": False, "plots": False},
}


def test_same_metrics_whatever_the_packing_with_every_model_on(tmp_path):
    # Arrange / Act
    one = rayfl.run(MOVING, {"ray.clients_per_actor": 1, "output.dir": str(tmp_path)})
    packed = rayfl.run(
        MOVING, {"ray.clients_per_actor": 3, "output.dir": str(tmp_path)}
    )
    # Assert: identical round × client and round logs (DESIGN.md determinism)
    assert one.summary["num_actors"] == 6 and packed.summary["num_actors"] == 2
    pd.testing.assert_frame_equal(one.metrics, packed.metrics)
    columns = ["num_scheduled", "num_delivered", "num_stragglers", "latency_s"]
    pd.testing.assert_frame_equal(one.rounds[columns], packed.rounds[columns])
    # An unavailable client is never scheduled, so never trained
    chain = OnOffAvailability(2, range(6), mean_on=3.0, mean_off=2.0)
    m = one.metrics
    for t in range(4):
        online = chain.available(t)
        scheduled = m[(m["round"] == t) & m["scheduled"]]["client"].to_numpy()
        assert online[scheduled].all(), (t, scheduled, online)
        assert not m[(m["round"] == t) & ~m["scheduled"]]["train_loss"].notna().any()
    # the deadline bit: stragglers are lost, and the count is the late uploads
    late = m["scheduled"] & (m["latency_s"] > 0.02)
    assert not m[late]["delivered"].any()
    per_round = late.groupby(m["round"]).sum().to_numpy()
    np.testing.assert_array_equal(one.rounds["num_stragglers"], per_round)
    assert per_round.sum() > 0 and (m["scheduled"] & ~late).sum() > 0
    # the channel followed the devices: each upload's SNR is the moving
    # world's (mobility + Gudmundson), not the static geometry's
    moving, static = _snr_of(MOVING), _snr_of(STATIC)
    sent = m[m["scheduled"]]
    keys = [(int(r), int(c), int(k)) for r, c, k in
            sent[["round", "client", "subchannel"]].to_numpy()]  # fmt: skip
    np.testing.assert_allclose(
        sent["snr_db"], [moving[r][c, k] for r, c, k in keys], rtol=1e-6
    )
    assert not np.allclose(sent["snr_db"], [static[r][c, k] for r, c, k in keys])


#: MOVING with the papers' geometry (no mobility, shadowing drawn once).
STATIC = {
    **MOVING,
    "wireless": {
        key: value
        for key, value in MOVING["wireless"].items()
        if not key.startswith("mobility") and key != "shadowing_decorrelation_m"
    },
}


def _snr_of(config: dict) -> list[np.ndarray]:
    """Each round's (N, K) uplink SNR in dB of ``config``'s world, off Ray."""
    from rayfl.config import load_config
    from rayfl.uplink import UplinkModel

    uplink = UplinkModel(load_config(config), num_train=np.full(6, 40))
    return [np.asarray(uplink.channel_state(t).snr_db) for t in range(4)]


#: A small star (4 clients, 2 subchannels, 3-round episodes) with every model on.
LANES_SMALL = [
    "data.num_clients=4",
    "wireless.num_subchannels=2",
    "rounds=3",
    "wireless.fading_dynamics=gauss_markov",
    "wireless.fading_correlation=0.9",
    "wireless.availability=markov",
    "wireless.mean_on_rounds=2",
    "wireless.mean_off_rounds=2",
    "wireless.cpu_frequency_distribution=uniform",
    "wireless.cpu_frequency_low_hz=5e8",
    "wireless.cpu_frequency_high_hz=3e9",
    "wireless.round_deadline_s=0.03",
    "wireless.mobility=gauss_markov",
    "wireless.mobility_memory=0.7",
    "wireless.mobility_speed_mean_mps=8",
    "wireless.mobility_speed_std_mps=2",
    "wireless.mobility_direction_std_rad=0.5",
    "wireless.round_duration_s=2",
    "wireless.shadowing_std_db=6",
    "wireless.shadowing_decorrelation_m=10",
]


def test_the_emulation_lanes_run_a_moving_world_as_the_single_env():
    # Arrange: the vector env (lanes on shared hosts), then one single env
    from envs.star.scheduling import WirelessFLEnv
    from envs.star.vector import WirelessFLVectorEnv
    from tests.envs.test_vector import _assert_lane_matches

    venv = WirelessFLVectorEnv(2, mode="emulate", overrides=LANES_SMALL)
    venv.action_space.seed(0)
    actions = [venv.action_space.sample() for _ in range(3)]
    ignored = []
    try:
        assert not venv.columnar  # the columns refuse a moving world
        obs, _ = venv.reset(seed=10)
        vector = [(obs, None, None, None)]
        for action in actions:
            obs, reward, terminated, truncated, info = venv.step(action)
            vector.append((obs, reward, terminated, truncated))
            ignored.append(info["ignored"])
    finally:
        venv.close()
    env = WirelessFLEnv(mode="emulate", overrides=LANES_SMALL)
    try:
        for lane in range(2):
            obs, _ = env.reset(seed=10 + lane)
            single = [(obs, None, None, None)]
            for step, action in enumerate(actions):
                obs, reward, terminated, truncated, info = env.step(action[lane])
                single.append((obs, reward, terminated, truncated))
                assert list(ignored[step][lane]) == info["ignored"]
            # Assert: lane e is the single env with seed 10 + e, moving world too
            _assert_lane_matches(vector, single, lane)
    finally:
        env.close()
    away = [step[0]["available"] == 0 for step in vector]
    assert np.any(away)  # the chain took some client away
