"""rayfl.observation: the schema against today's four spaces, the tracker, the context."""

from __future__ import annotations

import dataclasses
import typing

import numpy as np
import pytest
from gymnasium import spaces

import rayfl.observation as observation
from rayfl.observation import (
    CORE_KEYS,
    EXTRA_KEYS,
    FIELDS,
    MOVING_KEYS,
    LinkConstants,
    Observation,
    ObservationTracker,
    SystemContext,
    observation_space,
    unit_shape,
)
from rayfl.registry import topology_names, topology_of
from rayfl.seeding import rng_for


def _same(space: spaces.Dict, other: spaces.Dict) -> None:
    assert set(space.spaces) == set(other.spaces)
    for key, box in other.spaces.items():
        mine = space[key]
        assert (mine.shape, mine.dtype) == (box.shape, box.dtype), key
        np.testing.assert_array_equal(mine.low, box.low, err_msg=key)
        np.testing.assert_array_equal(mine.high, box.high, err_msg=key)


def test_star_space_is_the_scheduling_envs():
    from envs.star.scheduling import WirelessFLEnv

    env = WirelessFLEnv(overrides=["data.num_clients=7", "wireless.num_subchannels=3"])
    _same(
        observation_space(topology_of("star").observation_keys, 7, 3),
        env.observation_space,
    )
    assert unit_shape(env.observation_space) == (7, 3)


@pytest.mark.parametrize("shape", [(5, 2), (1, 1), (9, 9)])
def test_hierarchical_edge_space_is_the_hierarchys(shape):
    from rayfl.hierarchy.scheduling import OBS_KEYS, edge_spaces

    assert set(OBS_KEYS) == set(topology_of("hierarchical").observation_keys)
    _same(observation_space(OBS_KEYS, *shape), edge_spaces(*shape)[0])


def test_d2d_target_and_selection_spaces_are_the_d2d_ones():
    from envs.d2d import D2DNeighborEnv
    from rayfl.d2d.selection import selection_spaces

    env = D2DNeighborEnv()
    n, f = env.target_spaces[0]["channel_gain"].shape
    _same(
        observation_space(topology_of("d2d").observation_keys, n, f),
        env.target_spaces[0],
    )
    selection = selection_spaces(6, 4)[0]
    _same(observation_space(list(selection.spaces), 6, 4), selection)


def test_table_typeddict_and_docstring_agree():
    assert tuple(FIELDS) == CORE_KEYS + EXTRA_KEYS + MOVING_KEYS
    assert list(typing.get_type_hints(Observation)) == list(FIELDS)
    doc = observation.__doc__
    for field in FIELDS.values():
        row = next(
            line for line in doc.splitlines() if line.startswith(f"| {field.key} |")
        )
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2] == {"NK": "(N, K)", "N": "(N,)", "1": "(1,)"}[field.shape]
        low, high = (float(c.replace("−", "-")) for c in cells[4:6])
        assert (low, high) == (field.low, field.high), field.key


def test_space_rejects_unknown_keys_and_empty_units():
    with pytest.raises(ValueError, match="unknown observation keys \\['gain'\\]"):
        observation_space(["gain"], 3, 2)
    with pytest.raises(ValueError, match="N=0"):
        observation_space(CORE_KEYS, 0, 2)
    assert unit_shape(observation_space(["eligible", "round"], 4, 1)) == (4, None)
    with pytest.raises(ValueError, match="needs a Box under 'channel_gain'"):
        unit_shape(observation_space(["round"], 4, 1))


def test_sampled_observations_fit_their_space():
    for topology in topology_names():
        keys = topology_of(topology).observation_keys
        space = observation_space(keys, 6, 3)
        space.seed(0)
        sample = space.sample()
        assert space.contains(sample), topology


def test_tracker_follows_the_scheduling_env_rule():
    # Oracle: the star's rule (formerly the env's own update): the loss of a
    # delivered client with a finite train loss is replaced, staleness +1, 0 on delivery.
    rng = np.random.default_rng(0)
    n = 6
    tracker = ObservationTracker(n, initial_loss=2.5)
    loss, staleness, uploads = np.full(n, 2.5), np.zeros(n), np.zeros(n)
    for _ in range(30):
        chosen = rng.choice(n, size=3, replace=False)
        delivered = chosen[rng.random(3) < 0.7]
        losses = {int(c): float(rng.choice([rng.random(), np.nan])) for c in delivered}
        tracker.update(chosen, delivered, losses)
        for c, value in losses.items():
            if np.isfinite(value):
                loss[c] = value
        staleness += 1
        staleness[delivered] = 0
        uploads[delivered] += 1
        np.testing.assert_array_equal(tracker.loss, loss)
        np.testing.assert_array_equal(tracker.staleness, staleness)
        np.testing.assert_array_equal(tracker.upload_count, uploads)
        assert set(np.flatnonzero(tracker.selected)) == set(chosen.tolist())
    fields = tracker.fields()
    assert all(v.dtype == np.float32 and v.shape == (n,) for v in fields.values())


def test_tracker_state_round_trips_and_checks_lengths():
    tracker = ObservationTracker(3, initial_loss=[1.0, 2.0, 3.0])
    tracker.update([0, 2], [2], {2: 0.5})
    restored = ObservationTracker(3)
    restored.load_state_dict(tracker.state_dict())
    assert restored.state_dict() == tracker.state_dict()
    with pytest.raises(ValueError, match="'loss' has 2 rows, expected 3"):
        restored.load_state_dict({**tracker.state_dict(), "loss": [1.0, 2.0]})


def test_tracker_records_a_round_from_its_rows():
    tracker = ObservationTracker(4, initial_loss=[1.0, 2.0, 3.0, 4.0])
    rows = [
        {"client": 0, "delivered": True, "train_loss": 0.5},
        {"client": 1, "delivered": True, "train_loss": float("nan")},
        {"client": 2, "delivered": False, "train_loss": 0.1},
        {"client": 3, "delivered": True},  # an actor lost mid-round: no loss
    ]
    tracker.record(rows, [0, 1, 3])
    assert tracker.loss.tolist() == [0.5, 2.0, 3.0, 4.0]
    assert tracker.staleness.tolist() == [0, 0, 1, 0]
    assert tracker.selected.tolist() == [1, 1, 1, 1]


def test_context_is_frozen_checked_and_keys_its_draws():
    context = SystemContext(
        topology="hierarchical",
        seed=11,
        rounds=5,
        model_dim=100,
        unit=2,
        num_units=3,
        link=LinkConstants(bandwidth_hz=1e6, noise_psd_dbm_hz=-174, tx_power_dbm=20),
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.seed = 1  # type: ignore[misc]
    draw = context.rng("hier_participants", round=4, client=2).random(5)
    np.testing.assert_array_equal(
        draw, rng_for(11, "hier_participants", round=4, client=2).random(5)
    )
    np.testing.assert_array_equal(
        context.rng("schedule").random(2), rng_for(11, "schedule").random(2)
    )
    assert context.replace(unit=0).unit == 0 and context.unit == 2
    with pytest.raises(ValueError, match="topology must name a registered topology"):
        SystemContext(topology="", seed=0, rounds=1, model_dim=1)
    # any registered topology's name, e.g. one a user adds (rayfl.registry)
    assert (
        SystemContext(topology="ring", seed=0, rounds=1, model_dim=1).topology == "ring"
    )
    with pytest.raises(ValueError, match="unit must be in \\[0, 3\\)"):
        context.replace(unit=3)
