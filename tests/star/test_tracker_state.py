"""The star round's tracker state: a checkpoint restores what the observation reads."""

from types import SimpleNamespace

import numpy as np

from rayfl.observation import ObservationTracker
from rayfl.star import StarRound


def _round_and_engine():
    star = StarRound()
    star.personalized = False
    star.uplink = SimpleNamespace(
        ledger=SimpleNamespace(state_dict=dict, load_state_dict=lambda state: None)
    )
    engine = SimpleNamespace(
        num_clients=3, client_states=dict, set_client_states=lambda clients: None
    )
    return star, engine


def test_tracker_state_round_trips_through_the_star_checkpoint():
    star, engine = _round_and_engine()
    star.tracker = ObservationTracker(3, [1.0, 2.0, 3.0])
    star.tracker.record([{"client": 1, "delivered": True, "train_loss": 0.25}], [1])
    state = star.state_dict(engine)
    restored, _ = _round_and_engine()
    restored.load_state_dict(engine, state)
    assert restored.tracker.state_dict() == star.tracker.state_dict()
    assert restored.tracker.loss.tolist() == [1.0, 0.25, 3.0]


def test_a_checkpoint_with_loss_and_staleness_only_still_loads():
    star, engine = _round_and_engine()
    old = {"clients": {}, "ledger": {}, "tracker": {"loss": [4.0, 5.0, 6.0]}}
    old["tracker"]["staleness"] = np.array([0.0, 2.0, 1.0])
    star.load_state_dict(engine, old)
    assert star.tracker.loss.tolist() == [4.0, 5.0, 6.0]
    assert star.tracker.staleness.tolist() == [0.0, 2.0, 1.0]
    assert star.tracker.upload_count.tolist() == [0.0, 0.0, 0.0]
