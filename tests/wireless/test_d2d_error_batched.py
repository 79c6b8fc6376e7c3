"""P^err of every link at once (fixed quadrature) against the adaptive ``quad``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.layout import make_layout
from rayfl.wireless.d2d_error import error_probabilities_to_target
from rayfl.wireless.d2d_error_batched import error_probabilities_batched


def _args(topology, layout):
    return {
        "tx_power_w": topology.tx_power_w,
        "sinr_threshold": topology.sinr_threshold,
        "noise_power_w": layout.noise_power_w,
        "fading_threshold": topology.fading_threshold,
        "rayleigh_factor": topology.rayleigh_factor,
        "num_subchannels": topology.num_subchannels,
        "interference_var": topology.interference_var,
        "pdf": topology.fading_pdf,
    }


@pytest.mark.parametrize(
    ("variance", "pdf"),
    itertools.product(("paper", "bernoulli"), ("single", "max_of_F")),
)
@pytest.mark.parametrize("side_m", [10.0, 50.0, 3_000.0, 30_000.0])
def test_batched_matches_adaptive_quad_per_link(variance, pdf, side_m):
    # Arrange: interference-limited (small squares) to noise-limited (large)
    topology = D2DTopologyConfig(
        side_m=side_m,
        interference_var=variance,
        fading_pdf=pdf,
        num_subchannels=3,
        sinr_threshold=5.0,
    )
    for seed, target in itertools.product(range(3), (0, 6)):
        layout = make_layout(topology, 11, seed=seed)
        args = _args(topology, layout)
        # Act
        fast = error_probabilities_batched(layout.path_gain, target, **args)
        # Assert: within quad's own absolute tolerance (1.49e-8) times a few
        want = error_probabilities_to_target(layout.path_gain, target, **args)
        np.testing.assert_allclose(fast, want, rtol=0, atol=5e-8)
        assert fast[target] == 1.0


def test_batched_spans_every_regime_it_is_checked_in():
    # Guard the test above: its layouts give P^err from < 0.01 to the e^{−β²/Γ} cap
    values = []
    for side_m in (10.0, 50.0, 3_000.0, 30_000.0):
        topology = D2DTopologyConfig(side_m=side_m, num_subchannels=3)
        layout = make_layout(topology, 11, seed=0)
        got = error_probabilities_batched(
            layout.path_gain, 0, **_args(topology, layout)
        )
        values.extend(got[1:])
    assert min(values) < 1e-2 and max(values) > 0.99 * np.exp(-2.0)


def test_two_nodes_fall_back_to_the_snr_rule():
    # Arrange: no interferer, so Ẽ = 0 (the adaptive version's guard)
    topology = D2DTopologyConfig(side_m=3_000.0, num_subchannels=3)
    layout = make_layout(topology, 2, seed=1)
    args = _args(topology, layout)
    # Act
    fast = error_probabilities_batched(layout.path_gain, 0, **args)
    # Assert
    want = error_probabilities_to_target(layout.path_gain, 0, **args)
    np.testing.assert_allclose(fast, want, rtol=0, atol=1e-12)


def test_bad_arguments_are_named():
    gain = np.ones((3, 3))
    kwargs = {"tx_power_w": 0.2, "sinr_threshold": 5.0, "noise_power_w": 1e-13}
    with pytest.raises(ValueError, match="pdf must be"):
        error_probabilities_batched(gain, 0, pdf="rice", **kwargs)
    with pytest.raises(ValueError, match="interference_var must be"):
        error_probabilities_batched(gain, 0, interference_var="x", **kwargs)
    with pytest.raises(ValueError, match="0 <= target < N"):
        error_probabilities_batched(gain, 3, **kwargs)
