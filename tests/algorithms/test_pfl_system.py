"""Personalized downloads through Ray: object refs, partial participation, downlink."""

import numpy as np
import pandas as pd
import pytest

import rayfl

BASE = {
    "name": "t",
    "rounds": 3,
    "data": {"dataset": "digits", "num_clients": 5, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {"batch_size": 32, "lr": 0.1},
    "scheduler": {"policy": "random"},  # 2 clients a round: the 2 subchannels
    "wireless": {"num_subchannels": 2},
    "output": {"progress": False, "plots": False},
}


def _check_downlink(one, kind):
    m = one.metrics
    dim = one.summary["model_dim"]
    trained = set(m[m.scheduled]["client"])
    assert sorted(np.flatnonzero(one.summary["local_updates"])) == sorted(trained)
    # Downlink: FedAMP sends m_n and ξ_nn (+ ω⁰ on a client's first download);
    # APPLE sends the other N − 1 cores.
    expected, seen = [], set()
    for t in range(3):
        bits = 0.0
        for c in m[(m["round"] == t) & m.scheduled]["client"]:
            if kind == "fedamp":
                bits += 32 * (dim + 1 + (dim if c not in seen else 0))
            else:
                bits += 32 * 4 * dim
            seen.add(c)
        expected.append(bits)
    np.testing.assert_allclose(one.rounds["download_bits"], expected)
    assert one.summary["totals"]["download_bits"] == pytest.approx(sum(expected))
    assert (one.rounds["downlink_latency_s"] > 0).all()  # wireless model is on


def test_fedamp_downloads_reach_scheduled_clients_and_count_on_downlink(
    ray_session, tmp_path
):
    cfg = {**BASE, "algorithm": {**BASE["algorithm"], "kind": "fedamp"}}
    _check_downlink(rayfl.run(cfg, {"output.dir": str(tmp_path)}), "fedamp")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fedamp", "apple"])
def test_personalized_downloads_are_packing_independent(ray_session, tmp_path, kind):
    # Arrange / Act: two packings of the same run
    cfg = {**BASE, "algorithm": {**BASE["algorithm"], "kind": kind}}
    one = rayfl.run(cfg, {"ray.clients_per_actor": 1, "output.dir": str(tmp_path)})
    packed = rayfl.run(cfg, {"ray.clients_per_actor": 3, "output.dir": str(tmp_path)})
    # Assert
    pd.testing.assert_frame_equal(one.metrics, packed.metrics)
    _check_downlink(one, kind)


def test_fedavg_rounds_have_no_download_bits(ray_session, tmp_path):
    cfg = {**BASE, "algorithm": {**BASE["algorithm"], "kind": "fedavg"}, "rounds": 1}
    result = rayfl.run(cfg, {"output.dir": str(tmp_path)})
    assert (result.rounds["download_bits"] == 0).all()
