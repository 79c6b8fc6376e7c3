"""Oracle tests of the moving-world models (rayfl.wireless.dynamics, issue 48).

- Gauss-Markov fading: the lag-1 autocorrelation of the complex gain equals ρ
  within sampling error over 10^5 pairs; the marginal |h| stays Rayleigh with
  scale 1/√2 (KS test), so |h|² is the unit-mean power of the i.i.d. model;
  Jakes' ρ = J0(2π f_D T) at its first zero; a client's series is the same
  whoever else is followed (packing independence); a checkpoint resumes it.
- On/off availability: the mean on and off periods and the stationary share
  match the configured ones.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rayfl.wireless.dynamics import (
    GaussMarkovFading,
    OnOffAvailability,
    doppler_hz,
    jakes_correlation,
)


def _series(fading: GaussMarkovFading, rounds: int) -> np.ndarray:
    return np.stack([fading.complex_gains(t) for t in range(rounds)])  # (T, N, K)


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.95])
def test_gauss_markov_lag1_correlation_is_rho(rho):
    h = _series(GaussMarkovFading(3, range(500), 4, rho=rho), 51)
    pairs = (h[1:] * np.conj(h[:-1])).ravel()  # 50 · 500 · 4 = 10^5 pairs
    power = (np.abs(h) ** 2).mean()
    estimate = pairs.mean().real / power
    # standard errors: the ratio's below 0.005; the mean power's, over series
    # correlated in time, √((1 + ρ²)/((1 − ρ²) n)) ≈ 0.014 at ρ = 0.95
    assert estimate == pytest.approx(rho, abs=0.02)
    assert abs(pairs.mean().imag) < 0.05  # circular: no phase drift
    assert power == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("rho", [0.0, 0.9])
def test_gauss_markov_marginal_stays_rayleigh(rho):
    fading = GaussMarkovFading(5, range(2500), 4, rho=rho)
    for t in range(20):
        amplitude = np.abs(fading.complex_gains(t)).ravel()  # 10^4, independent
    result = stats.kstest(amplitude, stats.rayleigh(scale=1 / np.sqrt(2)).cdf)
    assert result.pvalue > 1e-3, result


def test_jakes_correlation_at_its_first_zero_and_doppler():
    first_zero = 2.404825557695773  # J0's first root
    speed = 10.0  # m/s
    f_d = doppler_hz(speed, 2.4e9)
    assert f_d == pytest.approx(speed * 2.4e9 / 299_792_458.0)
    assert jakes_correlation(f_d, first_zero / (2 * np.pi * f_d)) == pytest.approx(
        0.0, abs=1e-12
    )
    assert jakes_correlation(f_d, 0.0) == 1.0
    with pytest.raises(ValueError, match="must be >= 0"):
        jakes_correlation(-1.0, 1.0)


def test_a_clients_series_does_not_depend_on_who_else_is_followed():
    everyone = _series(GaussMarkovFading(7, range(6), 3, rho=0.8), 5)
    some = _series(GaussMarkovFading(7, [4, 1], 3, rho=0.8), 5)
    np.testing.assert_array_equal(some[:, 0], everyone[:, 4])
    np.testing.assert_array_equal(some[:, 1], everyone[:, 1])


def test_fading_resumes_from_its_state_and_draws_in_order():
    whole = GaussMarkovFading(1, range(3), 2, rho=0.7)
    first = [whole.power_gains(t) for t in range(4)]
    half = GaussMarkovFading(1, range(3), 2, rho=0.7)
    for t in range(2):
        half.power_gains(t)
    resumed = GaussMarkovFading(1, range(3), 2, rho=0.7)
    resumed.load_state_dict(half.state_dict())
    np.testing.assert_array_equal(resumed.power_gains(2), first[2])
    with pytest.raises(ValueError, match="draw in order"):
        resumed.power_gains(5)
    with pytest.raises(ValueError, match="rho must be in"):
        GaussMarkovFading(1, range(3), 2, rho=1.5)


def _periods(on: np.ndarray) -> tuple[list[int], list[int]]:
    """Lengths of the complete on and off runs of each client's (T,) series."""
    ons, offs = [], []
    for series in on.T:
        change = np.flatnonzero(np.diff(series.astype(int))) + 1
        runs = np.split(series, change)[1:-1]  # drop the cut first and last runs
        for run in runs:
            (ons if run[0] else offs).append(len(run))
    return ons, offs


def test_on_off_chain_keeps_the_configured_means():
    chain = OnOffAvailability(11, range(200), mean_on=8.0, mean_off=3.0)
    on = np.stack([chain.available(t) for t in range(400)])  # (T, N)
    ons, offs = _periods(on)
    assert len(ons) > 5000 and len(offs) > 5000
    # geometric periods: standard errors √(T(T-1)/n) ≈ 0.1 and 0.03
    assert np.mean(ons) == pytest.approx(8.0, rel=0.05)
    assert np.mean(offs) == pytest.approx(3.0, rel=0.05)
    assert on.mean() == pytest.approx(8.0 / 11.0, abs=0.02)  # stationary share
    with pytest.raises(ValueError, match=">= 1 round"):
        OnOffAvailability(0, range(2), mean_on=0.5, mean_off=2)
