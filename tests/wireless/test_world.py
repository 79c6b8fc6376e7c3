"""Tests for the run's moving world (rayfl.wireless.world) and its config fields."""

from __future__ import annotations

import doctest
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats
from scipy.special import j0

import rayfl.wireless.world as world_module
from rayfl.wireless.config import WirelessConfig, moving_world_fields
from rayfl.wireless.dynamics import OnOffAvailability
from rayfl.wireless.world import (
    AVAILABILITY,
    LastSeen,
    MovingWorld,
    Replayed,
    fading_rho,
    register_availability,
)

GAUSS_MARKOV = {"fading_dynamics": "gauss_markov"}


def _world(num_clients: int = 20, seed: int = 0, **fields: object) -> MovingWorld:
    return MovingWorld(WirelessConfig(**fields), seed, num_clients)


def test_doctests() -> None:
    assert doctest.testmod(world_module).failed == 0


def test_rho_zero_gives_the_iid_law_and_no_memory() -> None:
    # Arrange: ρ = 0, 2000 clients × 4 subchannels × 6 rounds of power gains
    world = _world(2000, seed=3, **GAUSS_MARKOV, fading_correlation=0.0)
    # Act
    up = np.stack([world.fading(t)[0] for t in range(6)])
    # Assert: the marginal is Exp(1) (Rayleigh power) and rounds are uncorrelated
    assert stats.kstest(up.reshape(-1), "expon").pvalue > 1e-3
    lag1 = np.corrcoef(up[:-1].reshape(-1), up[1:].reshape(-1))[0, 1]
    assert abs(lag1) < 0.02  # 40,000 pairs: the std of r is 0.005


def test_rho_near_one_gives_nearly_constant_gains() -> None:
    # Arrange
    world = _world(50, **GAUSS_MARKOV, fading_correlation=0.9999)
    # Act
    up = np.stack([world.fading(t)[0] for t in range(10)])
    down = np.stack([world.fading(t)[1] for t in range(10)])
    # Assert: |h_t|² moves by a few percent of its value over 10 rounds
    np.testing.assert_allclose(up, up[:1].repeat(10, 0), rtol=0.3, atol=0.05)
    np.testing.assert_allclose(down, down[:1].repeat(10, 0), rtol=0.3, atol=0.05)
    assert np.abs(up - up[0]).mean() < 0.05 * up.mean()


def test_power_autocorrelation_is_rho_squared_by_jakes() -> None:
    # Arrange: f_D from speed and carrier, ρ = J0(2π f_D T) (Jakes)
    cfg = WirelessConfig(
        **GAUSS_MARKOV, speed_mps=3.0, carrier_hz=2.4e9, round_duration_s=0.01
    )
    rho = float(j0(2 * np.pi * 3.0 * 2.4e9 / 299_792_458.0 * 0.01))
    world = MovingWorld(cfg, 5, 4000)
    # Act
    up = np.stack([world.fading(t)[0] for t in range(3)])
    # Assert: corr(|h_t|², |h_t+1|²) = ρ² for a complex Gaussian AR(1)
    assert fading_rho(cfg) == pytest.approx(rho)
    lag1 = np.corrcoef(up[:-1].reshape(-1), up[1:].reshape(-1))[0, 1]
    assert lag1 == pytest.approx(rho**2, abs=0.02)


def test_rician_gauss_markov_keeps_the_rician_mean() -> None:
    world = _world(3000, fading="rician", rician_k_db=6.0, **GAUSS_MARKOV,
                   fading_correlation=0.5)  # fmt: skip
    up = np.stack([world.fading(t)[0] for t in range(3)])
    assert up.mean() == pytest.approx(1.0, abs=0.02)


def test_rounds_asked_in_any_order_give_the_same_world() -> None:
    # Arrange
    fields = {**GAUSS_MARKOV, "fading_correlation": 0.7, "availability": "markov",
              "mean_on_rounds": 3.0, "mean_off_rounds": 2.0}  # fmt: skip
    in_order, jumping = _world(**fields), _world(**fields)
    # Act
    forward = [in_order.fading(t)[0] for t in range(5)]
    online = [in_order.available(t) for t in range(5)]
    # Assert: a later round first, then an earlier one (a resumed run, a restart)
    np.testing.assert_array_equal(jumping.fading(4)[0], forward[4])
    np.testing.assert_array_equal(jumping.fading(1)[0], forward[1])
    np.testing.assert_array_equal(jumping.available(3), online[3])
    np.testing.assert_array_equal(jumping.available(0), online[0])


def test_markov_availability_is_the_on_off_chain_of_each_client() -> None:
    # Arrange
    world = _world(30, seed=7, availability="markov", mean_on_rounds=4.0,
                   mean_off_rounds=2.0)  # fmt: skip
    chain = OnOffAvailability(7, range(30), mean_on=4.0, mean_off=2.0)
    # Act / Assert: the engine's series is the groundwork's chain
    for t in range(8):
        np.testing.assert_array_equal(world.available(t), chain.available(t))
    assert _world(4).available(0).all()  # always: everyone, every round


def test_cpu_frequencies_follow_the_configured_law() -> None:
    # Arrange
    uniform = _world(4000, cpu_frequency_distribution="uniform",
                     cpu_frequency_low_hz=1e9, cpu_frequency_high_hz=3e9)  # fmt: skip
    lognormal = _world(4000, cpu_frequency_distribution="lognormal",
                       cpu_frequency_hz=2e9, cpu_frequency_sigma=0.5)  # fmt: skip
    # Act
    f_uniform, f_lognormal = uniform.cpu_frequency_hz, lognormal.cpu_frequency_hz
    # Assert (KS tests) and the default: one value for everyone (None)
    assert f_uniform is not None and f_lognormal is not None
    assert stats.kstest(f_uniform, "uniform", args=(1e9, 2e9)).pvalue > 1e-3
    z = np.log(f_lognormal / 2e9) / 0.5
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert _world(4).cpu_frequency_hz is None


def test_last_seen_keeps_an_unreachable_clients_gain_and_counts_its_age() -> None:
    # Arrange: 2 clients, K = 1; client 1 is away in rounds 1 and 2
    gains = {t: np.array([[float(t)], [10.0 + t]]) for t in range(4)}
    online = {0: [True, True], 1: [True, False], 2: [True, False], 3: [True, True]}
    seen = LastSeen(np.array([[-1.0], [-1.0]]))
    # Act
    gain2, age2 = seen.at(2, gains.__getitem__, lambda t: np.array(online[t]))
    gain3, age3 = seen.at(3, gains.__getitem__, lambda t: np.array(online[t]))
    # Assert
    np.testing.assert_array_equal(gain2[:, 0], [2.0, 10.0])
    np.testing.assert_array_equal(age2, [0.0, 2.0])
    np.testing.assert_array_equal(gain3[:, 0], [3.0, 13.0])
    np.testing.assert_array_equal(age3, [0.0, 0.0])


def test_replayed_steps_forward_and_replays_from_zero() -> None:
    made = []
    draws = Replayed(lambda: made.append(1) or [], lambda m, t: m.append(t) or list(m))
    assert draws(2) == [0, 1, 2]
    assert draws(1) == [0, 1] and len(made) == 2


def test_an_availability_kind_plugs_in_by_registration() -> None:
    # Arrange: a trace-like kind (here: client 0 always away)
    class Away:
        def __init__(self, wireless, seed, n):
            self.n = n

        def available(self, t):
            return np.arange(self.n) != 0

    register_availability("test_away", Away)
    try:
        # Act
        world = MovingWorld(WirelessConfig(), 0, 3)
        world.availability = AVAILABILITY["test_away"](world.wireless, 0, 3)
        # Assert
        assert world.available(5).tolist() == [False, True, True]
        with pytest.raises(ValueError, match="already registered"):
            register_availability("test_away", Away)
    finally:
        AVAILABILITY.pop("test_away")


def test_the_defaults_move_nothing() -> None:
    assert moving_world_fields(WirelessConfig()) == []
    world = _world(5)
    assert not world.correlated and world.availability is None
    with pytest.raises(ValueError, match="i.i.d. fading"):
        world.fading(0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (GAUSS_MARKOV, "needs exactly one of wireless.fading_correlation"),
        (
            {**GAUSS_MARKOV, "fading_correlation": 0.5, "doppler_hz": 3.0},
            "got fading_correlation, doppler_hz",
        ),
        ({**GAUSS_MARKOV, "doppler_hz": 3.0}, "round_duration_s goes with"),
        (
            {**GAUSS_MARKOV, "speed_mps": 3.0, "round_duration_s": 0.1},
            "carrier_hz goes with wireless.speed_mps",
        ),
        (
            {**GAUSS_MARKOV, "fading_correlation": 0.5, "round_duration_s": 0.1},
            "remove it",
        ),
        (
            {**GAUSS_MARKOV, "fading": "none", "fading_correlation": 0.5},
            "needs wireless.fading rayleigh or rician, got none",
        ),
        ({"doppler_hz": 3.0}, "doppler_hz is read only with"),
        ({"fading_correlation": 1.5}, "fading_correlation"),
        (
            {"availability": "markov", "mean_on_rounds": 3.0},
            "availability=markov needs wireless.mean_off_rounds",
        ),
        ({"mean_on_rounds": 3.0}, "mean_on_rounds is read only with"),
        (
            {"availability": "markov", "mean_on_rounds": 0.5, "mean_off_rounds": 2},
            "mean_on_rounds",
        ),
        ({"availability": "sometimes"}, "'always', 'markov' or 'trace'"),
        (
            {
                "cpu_frequency_distribution": "uniform",
                "cpu_frequency_low_hz": 2e9,
                "cpu_frequency_high_hz": 1e9,
            },
            "must be <= cpu_frequency_high_hz",
        ),
        (
            {"cpu_frequency_distribution": "lognormal"},
            "lognormal needs wireless.cpu_frequency_sigma",
        ),
        ({"cpu_frequency_sigma": 0.5}, "cpu_frequency_sigma is read only with"),
        ({"cpu_frequency_distribution": "gamma"}, "'constant', 'uniform' or"),
        ({"round_deadline_s": 0.0}, "round_deadline_s"),
    ],  # fmt: skip
    ids=[
        "gm-no-rho",
        "gm-two-rhos",
        "gm-doppler-no-T",
        "gm-speed-no-carrier",
        "gm-rho-with-T",
        "gm-no-fading",
        "iid-doppler",
        "rho-range",
        "markov-no-off",
        "on-without-markov",
        "on-below-1",
        "unknown-availability",
        "uniform-low-high",
        "lognormal-no-sigma",
        "sigma-without-lognormal",
        "unknown-distribution",
        "deadline-zero",
    ],  # fmt: skip
)
def test_bad_moving_world_fields_say_what_is_wrong(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        WirelessConfig(**fields)


TRACE = Path(__file__).resolve().parents[2] / "examples" / "availability_trace.csv"


def test_the_trace_kind_replays_the_file() -> None:
    # Arrange: the shipped sample (20 clients x 50 rounds), replayed every 50
    from rayfl.wireless.availability_trace import read_trace

    fields = {"availability": "trace", "availability_trace": str(TRACE),
              "availability_period_rounds": 50}  # fmt: skip
    world = _world(20, **fields)
    trace = read_trace(TRACE, num_clients=20, period_rounds=50)
    # Act / Assert
    for t in (0, 7, 49, 50, 123):
        np.testing.assert_array_equal(world.available(t), trace.available(t))
    assert not all(world.available(t).all() for t in range(50))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([], "needs wireless.availability_trace, which is unset"),
        (["wireless.availability_trace=nowhere.csv"], "no file 'nowhere.csv'"),
        (["wireless.availability_trace=BAD"], "BAD_FILE:3"),
    ],
    ids=["no-path", "missing-file", "bad-row"],
)
def test_a_bad_trace_is_an_error_when_the_config_is_checked(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    # Arrange: a trace whose second row ends before it starts
    from rayfl.config import ConfigError, load_config

    bad = tmp_path / "bad.csv"
    bad.write_text("client,start,end\n0,0,5\n1,6,2\n")
    overrides = [o.replace("BAD", str(bad)) for o in overrides]
    message = message.replace("BAD_FILE", str(bad))
    config = {
        "data": {"dataset": "digits", "num_clients": 4},
        "wireless": {"num_subchannels": 2, "availability": "trace"},
    }
    # Act / Assert
    with pytest.raises((ConfigError, ValidationError, ValueError), match=message):
        load_config(config, overrides)


@pytest.mark.parametrize(
    "fields",
    [
        {"availability_trace": "a.csv"},
        {"availability_trace_absent": "always"},
        {"availability_period_rounds": 5},
    ],
    ids=["path", "absent", "period"],
)
def test_trace_fields_without_the_trace_kind_are_refused(
    fields: dict[str, object],
) -> None:
    with pytest.raises(ValidationError, match="read only with wireless.availability"):
        WirelessConfig(**fields)
