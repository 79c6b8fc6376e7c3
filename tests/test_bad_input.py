"""Bad input ends in a short, clear error and leaves no run directory behind."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rayfl
from rayfl.config import ConfigError, RunConfig, load_config
from rayfl.data.datasets import DatasetError

KEYS = [
    "rounds",
    "seed",
    "eval_every",
    "name",
    "data.dataset",
    "data.num_clients",
    "data.partition",
    "data.alpha",
    "data.test_fraction",
    "data.shard_size",
    "model.kind",
    "model.hidden",
    "algorithm.kind",
    "algorithm.lr",
    "algorithm.batch_size",
    "algorithm.local_steps",
    "scheduler.policy",
    "scheduler.clients_per_round",
    "wireless.num_subchannels",
    "wireless.distance_min_m",
    "wireless.effects",
    "privacy.mechanism",
    "privacy.epsilon",
    "privacy.delta",
    "privacy.clip_norm",
    "compression.quantize_bits",
    "compression.sparsify_fraction",
    "ray.clients_per_actor",
    "output.checkpoint_every",
    "bogus",
    "data.bogus",
    "sweep",
]
VALUES = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.lists(st.integers(-5, 50), max_size=3),
    st.sampled_from(["iid", "dirichlet", "cnn", "mlr", "fedprox", "gaussian", "auto"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=5))
def test_random_configs_validate_or_fail_clearly(overrides):
    try:
        cfg = load_config(None, overrides)
    except ConfigError as e:
        message = str(e)
        assert message.startswith(("invalid config", "override"))
        assert len(message.splitlines()) <= 12
        assert "Traceback" not in message
    else:
        assert isinstance(cfg, RunConfig)


@pytest.mark.usefixtures("ray_session")
def test_impossible_partition_leaves_no_run_directory(tmp_path):
    cfg = {
        "data": {
            "dataset": "digits",
            "num_clients": 50,
            "partition": "shards",
            "num_shards_per_partition": 10,
            "shard_size": 100,
        },
        "output": {"dir": str(tmp_path), "progress": False},
    }
    with pytest.raises(DatasetError, match="shards"):
        rayfl.run(cfg)
    assert list(tmp_path.iterdir()) == []
