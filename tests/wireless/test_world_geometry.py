"""Mobility and Gudmundson's shadowing in the star's channel (issue 48).

The uplink model's channel of round t follows the distances of
:class:`rayfl.wireless.mobility.Mobility` and the shadowing of
:class:`rayfl.wireless.shadowing.GudmundsonShadowing` (the groundwork's oracle
tests are in test_mobility.py and test_shadowing.py); the papers' static world
is today's channel bit for bit. No Ray here.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from pydantic import ValidationError

import rayfl.wireless.config_rules as rules_module
from envs.star.scheduling import DEFAULT_CONFIG
from rayfl.config import load_config
from rayfl.seeding import rng_for
from rayfl.star.columns import columns_refusal
from rayfl.uplink import UplinkModel
from rayfl.wireless.channel import WirelessChannel
from rayfl.wireless.config import WirelessConfig, moving_world_fields
from rayfl.wireless.mobility import Mobility
from rayfl.wireless.shadowing import GudmundsonShadowing

SEED, N = 5, 10
WAYPOINT = [
    "wireless.mobility=random_waypoint",
    "wireless.mobility_speed_min_mps=5",
    "wireless.mobility_speed_max_mps=15",
    "wireless.round_duration_s=2",
]
GUDMUNDSON = ["wireless.shadowing_std_db=8", "wireless.shadowing_decorrelation_m=20"]


def _uplink(overrides: list[str]) -> UplinkModel:
    cfg = load_config(DEFAULT_CONFIG, [f"seed={SEED}", *overrides])
    assert cfg.data.num_clients == N
    return UplinkModel(cfg, num_train=np.full(N, 50), model_dim=100)


def _by_hand_gain_db(
    cfg: WirelessConfig, distances_m: np.ndarray, shadowing_db: np.ndarray
) -> np.ndarray:
    """-(PL(1 m) + 10·α·log10(d) + s): the large-scale gain in dB, written out."""
    ref, alpha = cfg.path_loss_ref_db, cfg.path_loss_exponent
    return -(ref + 10.0 * alpha * np.log10(distances_m) + shadowing_db)


def test_doctests() -> None:
    assert doctest.testmod(rules_module).failed == 0


@pytest.mark.parametrize(
    "extra",
    [[], ["wireless.shadowing_decorrelation_m=20"]],
    ids=["static", "static-gudmundson"],
)
def test_a_static_world_is_todays_channel_bit_for_bit(extra: list[str]) -> None:
    # Arrange: today's channel, built as before issue 48, and the new code's
    base = ["wireless.shadowing_std_db=6", "wireless.mobility=static"]
    uplink = _uplink([*base, *extra])
    cfg = uplink.sections.wireless
    assert cfg is not None
    today = WirelessChannel(cfg, N, rng_for(SEED, "geometry"))
    for t in (0, 1, 4):
        # Act
        state = uplink.channel_state(t)
        before = today.realize(rng_for(SEED, "channel", round=t))
        # Assert: every array equal, bit for bit (a device at rest keeps its
        # shadowing under Gudmundson's model: a = exp(0) = 1)
        assert state is not None
        for name in ("distances_m", "gain_linear", "snr_db", "downlink_snr_db"):
            np.testing.assert_array_equal(getattr(state, name), getattr(before, name))
    if extra:
        geometry = uplink.world.geometry(3)  # type: ignore[union-attr]
        np.testing.assert_array_equal(geometry["shadowing_db"], today.shadowing_db)


def test_random_waypoint_distances_drive_path_loss_and_snr() -> None:
    # Arrange: no fading, so the gain is the large-scale gain alone
    uplink = _uplink([*WAYPOINT, "wireless.fading=none"])
    cfg = uplink.sections.wireless
    assert cfg is not None
    mobility = Mobility(
        "random_waypoint", SEED, range(N), distance_min_m=cfg.distance_min_m,
        distance_max_m=cfg.distance_max_m, round_s=2.0, speed_min_mps=5.0,
        speed_max_mps=15.0,
    )  # fmt: skip
    noise_dbm = cfg.noise_psd_dbm_hz + 10 * np.log10(cfg.bandwidth_hz)
    seen = []
    for t in (0, 1, 2, 5, 3):  # any order
        # Act
        state = uplink.channel_state(t)
        assert state is not None
        # Assert: round t's distances are the model's, and the gains, uplink
        # and downlink SNRs follow them (shadowing 0 dB by default)
        expected = mobility.distances(t)
        np.testing.assert_array_equal(state.distances_m, expected)
        gain_db = _by_hand_gain_db(cfg, expected, np.zeros(N))
        full = np.broadcast_to(gain_db[:, None], state.gain_db.shape)
        np.testing.assert_allclose(state.gain_db, full, rtol=0, atol=1e-9)
        np.testing.assert_allclose(
            state.snr_db[:, 0], cfg.tx_power_dbm + gain_db - noise_dbm, atol=1e-9
        )
        np.testing.assert_allclose(
            state.downlink_snr_db, cfg.bs_tx_power_dbm + gain_db - noise_dbm, atol=1e-9
        )
        seen.append(expected)
    # the devices moved: 10-30 m a round, so every distance changed by round 5
    assert np.all(seen[0] != seen[3])
    assert np.abs(seen[1] - seen[0]).max() > 1.0


def test_gudmundson_shadowing_follows_the_paths_moved() -> None:
    # Arrange: random waypoint + Gudmundson, fading off
    uplink = _uplink([*WAYPOINT, *GUDMUNDSON, "wireless.fading=none"])
    cfg = uplink.sections.wireless
    assert cfg is not None
    static = WirelessChannel(cfg, N, rng_for(SEED, "geometry")).shadowing_db
    mobility = Mobility(
        "random_waypoint", SEED, range(N), distance_min_m=cfg.distance_min_m,
        distance_max_m=cfg.distance_max_m, round_s=2.0, speed_min_mps=5.0,
        speed_max_mps=15.0,
    )  # fmt: skip
    series = GudmundsonShadowing(SEED, range(N), std_db=8.0, decorrelation_m=20.0,
                                 initial_db=static)  # fmt: skip
    for t in range(5):
        # Act
        state = uplink.channel_state(t)
        expected = series.shadowing_db(t, mobility.moved_m(t))
        # Assert: the channel's gain is PL(d_t) + s_t, s_t Gudmundson's series
        assert state is not None
        gain_db = _by_hand_gain_db(cfg, mobility.distances(t), expected)
        np.testing.assert_allclose(state.gain_db[:, 0], gain_db, atol=1e-9)
        if t == 0:  # the start is the channel's once-per-client draw
            np.testing.assert_array_equal(expected, static)
        else:  # 10-30 m moved against d_corr = 20 m: the shadowing changed
            assert np.all(expected != static)


def test_the_defaults_and_fields_of_a_moving_geometry() -> None:
    # Arrange
    moving = WirelessConfig(
        mobility="gauss_markov", mobility_memory=0.8, mobility_speed_mean_mps=3,
        mobility_speed_std_mps=1, mobility_direction_std_rad=0.3,
        round_duration_s=1, shadowing_std_db=4, shadowing_decorrelation_m=30,
    )  # fmt: skip
    cfg = load_config(DEFAULT_CONFIG, WAYPOINT)
    # Act / Assert: the columns refuse them by name; the defaults move nothing
    assert moving_world_fields(moving) == [
        "wireless.mobility=gauss_markov",
        "wireless.shadowing_decorrelation_m",
    ]
    assert "wireless.mobility=random_waypoint" in str(columns_refusal(cfg))
    assert _uplink([]).world.moving_geometry is None  # type: ignore[union-attr]
    assert _uplink([]).world.geometry(2) == {}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"mobility": "random_waypoint", "round_duration_s": 1.0},
         "mobility=random_waypoint needs wireless.mobility_speed_min_mps"),
        ({"mobility": "random_waypoint", "mobility_speed_min_mps": 1.0,
          "mobility_speed_max_mps": 2.0},
         "mobility=random_waypoint needs wireless.round_duration_s"),
        ({"mobility": "random_waypoint", "mobility_speed_min_mps": 3.0,
          "mobility_speed_max_mps": 2.0, "round_duration_s": 1.0},
         "mobility_speed_min_mps must be <= mobility_speed_max_mps, got 3 > 2"),
        ({"mobility": "random_waypoint", "mobility_speed_min_mps": 0.0,
          "mobility_speed_max_mps": 2.0, "round_duration_s": 1.0},
         "mobility_speed_min_mps"),
        ({"mobility_memory": 0.5},
         "mobility_memory is read only with wireless.mobility=gauss_markov"),
        ({"mobility": "gauss_markov", "mobility_memory": 1.5},
         "mobility_memory"),
        ({"mobility": "teleport"}, "'static', 'random_waypoint' or 'gauss_markov'"),
        ({"shadowing_decorrelation_m": 20.0},
         "shadowing_decorrelation_m needs wireless.shadowing_std_db > 0"),
        ({"shadowing_std_db": 4.0, "shadowing_decorrelation_m": 0.0},
         "shadowing_decorrelation_m"),
        ({"round_duration_s": 1.0},
         "round_duration_s is read only with wireless.fading_dynamics="
         "gauss_markov or a moving mobility"),
    ],
    ids=["rwp-no-speed", "rwp-no-T", "rwp-min-max", "rwp-zero-speed",
         "memory-without-gm", "memory-range", "unknown-kind",
         "decorrelation-no-std", "decorrelation-zero", "T-alone"],
)  # fmt: skip
def test_bad_mobility_fields_say_what_is_wrong(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        WirelessConfig(**fields)


def test_round_duration_serves_mobility_beside_a_given_fading_correlation() -> None:
    # fading_correlation gives ρ; T is then mobility's round duration
    cfg = WirelessConfig(
        fading_dynamics="gauss_markov", fading_correlation=0.9,
        mobility="random_waypoint", mobility_speed_min_mps=1,
        mobility_speed_max_mps=2, round_duration_s=1.0,
    )  # fmt: skip
    assert cfg.round_duration_s == 1.0
