"""Every random purpose has its own stream id (parallel work once reused 15)."""

import numpy as np

from rayfl.seeding import PURPOSES


def test_purpose_ids_are_unique():
    ids = list(PURPOSES.values())
    duplicated = {v for v in ids if ids.count(v) > 1}
    assert not duplicated, {k: v for k, v in PURPOSES.items() if v in duplicated}


def test_rng_for_is_numpy_default_rng_of_the_key() -> None:
    """rng_for builds the generator by hand (faster): the stream of default_rng(key)."""
    from rayfl.seeding import PURPOSES, rng_for

    for seed, purpose, t, client in [(0, "batch", 0, 0), (2**31 - 1, "channel", 19, 7)]:
        key = [seed, PURPOSES[purpose], t, client]
        ours, numpy_s = (
            rng_for(seed, purpose, round=t, client=client),
            np.random.default_rng(key),
        )
        assert ours.bit_generator.state == numpy_s.bit_generator.state
        assert ours.random(4).tolist() == numpy_s.random(4).tolist()
