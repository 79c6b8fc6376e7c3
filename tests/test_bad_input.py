"""Bad input ends in a short, clear error and leaves no run directory behind."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rayfl
from rayfl.config import ConfigError, RunConfig, load_config
from rayfl.data.datasets import DatasetError

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")

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


# --------------------------------------------------------------------------
# Scheduling policies: refused at validation, before Ray starts


@pytest.fixture
def no_ray(monkeypatch):
    """Fail the test if anything tries to start or join a Ray session."""
    import ray

    def refuse(*args, **kwargs):
        raise AssertionError("ray.init was called: the config was not refused first")

    monkeypatch.setattr(ray, "init", refuse)


STAR = {"wireless": {"num_subchannels": 2}, "data": {"num_clients": 6}}
HIER = {"topology": {"kind": "hierarchical", "num_edges": 2}}
POLICY_REFUSALS = {
    "uniform-on-star": (
        {**STAR, "scheduler": {"policy": "uniform"}},
        "scheduler.policy=uniform is meant for topology.kind=hierarchical",
    ),
    "d2d-rule-on-star": (
        {**STAR, "scheduler": {"policy": "channel_threshold"}},
        "scheduler.policy=channel_threshold is meant for topology.kind=d2d",
    ),
    "subchannels-without-wireless": (
        {"scheduler": {"policy": "best_channel"}},
        "scheduler.policy=best_channel schedules subchannels",
    ),
    "bad-round-robin-subchannels": (
        {**STAR, "scheduler": {"policy": "round_robin", "params": {"subchannels": 2}}},
        "scheduler.params.subchannels: Input should be 'best_gain' or 'index'",
    ),
    "misspelt-parameter": (
        {**STAR, "scheduler": {"policy": "proportional_fair", "params": {"windw": 5}}},
        "scheduler.params.windw: scheduler.policy=proportional_fair has no "
        "parameter 'windw'; did you mean 'window'?",
    ),
    "number-as-text": (
        {**STAR, "scheduler": {"policy": "lyapunov", "params": {"V": "1e3"}}},
        "scheduler.params.V: Input should be a valid number (got '1e3')",
    ),
    "out-of-range-parameter": (
        {**STAR, "scheduler": {"policy": "lyapunov", "params": {"V": -1.0}}},
        "scheduler.params.V: Input should be greater than 0 (got -1.0)",
    ),
    "out-of-range-bound-field": (
        {**STAR, "scheduler": {"policy": "minmax", "params": {"mu": 2.5}}},
        "scheduler.params.mu: Input should be less than 2 (got 2.5)",
    ),
    "fixed-parameter": (
        {**STAR, "scheduler": {"policy": "non_adjustment", "params": {"adjust": True}}},
        "scheduler.params.adjust: scheduler.policy=non_adjustment has no parameter",
    ),
    "star-policy-on-edges": (
        {**HIER, "scheduler": {"policy": "minmax"}},
        "scheduler.policy=minmax is meant for topology.kind=star",
    ),
    "bad-edge-params": (
        {**HIER, "scheduler": {"policy": "round_robin", "params": {"cursor": 1}}},
        "scheduler.params.cursor: scheduler.policy=round_robin "
        "has no parameter 'cursor'",
    ),
    "star-policy-in-d2d": (
        {"topology": {"kind": "d2d"}, "scheduler": {"policy": "minmax"}},
        "scheduler.policy=minmax is meant for topology.kind=star",
    ),
    "bad-d2d-params": (
        {"topology": {"kind": "d2d"}, "scheduler": {"params": {"epsilon": "small"}}},
        "scheduler.params.epsilon: Input should be a valid number",
    ),
    "removed-edge-policy-field": (
        {"topology": {**HIER["topology"], "scheduling": {"policy": "random"}}},
        "topology.scheduling.policy is no longer read: give scheduler.policy",
    ),
    "removed-d2d-params-field": (
        {"topology": {"kind": "d2d", "policy_params": {"epsilon": 0.1}}},
        "topology.policy_params is no longer read: give scheduler.params",
    ),
}


@pytest.mark.parametrize(
    ("config", "expected"), POLICY_REFUSALS.values(), ids=POLICY_REFUSALS.keys()
)
@pytest.mark.usefixtures("no_ray")
def test_policy_refusals_name_the_field_in_one_screen_before_ray(
    config, expected, tmp_path
):
    config = {**config, "rounds": 1, "output": {"dir": str(tmp_path)}}
    with pytest.raises(ConfigError) as error:
        rayfl.run(config)
    message = str(error.value)
    assert expected in message
    assert message.startswith("invalid config:\n  ")
    lines = message.splitlines()
    assert len(lines) <= 4, message
    assert all(len(line) < 400 for line in lines), message
    assert "Traceback" not in message
    assert list(tmp_path.iterdir()) == []  # nothing written


def _registry_pairs():
    from rayfl.registry import POLICIES

    return [
        (name, kind) for name in sorted(POLICIES) for kind in ("star", "hierarchical")
    ]


@pytest.mark.parametrize(
    ("name", "topology"),
    _registry_pairs(),
    ids=[f"{n}-{t}" for n, t in _registry_pairs()],
)
def test_validation_and_check_policy_agree_on_every_policy_and_topology(name, topology):
    """A config is refused exactly when ``check_policy`` refuses the pair (and says why)."""
    from rayfl.registry import check_policy

    config, field = (STAR if topology == "star" else HIER), "scheduler.policy"
    overrides = {"scheduler.policy": name}
    try:
        check_policy(name, topology=topology, field=field)
    except ValueError as refusal:
        with pytest.raises(ConfigError) as error:
            load_config(config, overrides)
        message = str(error.value)
        # the same one-line reason, or (hierarchy) the name is not offered at all
        assert str(refusal) in message or f"{field}: unknown name {name!r}" in message
        return
    assert load_config(config, overrides).scheduler.policy == name


def test_policy_parameters_come_from_the_constructors():
    from rayfl.registry import check_params, policy_parameters

    assert set(policy_parameters("proportional_fair")) == {"window"}
    # minmax takes the bound's fields through **bound; non_adjustment fixes adjust
    assert {"mu", "num_params", "adjust"} <= set(policy_parameters("minmax"))
    assert "adjust" not in policy_parameters("non_adjustment")
    assert "num_params" in policy_parameters("non_adjustment")
    check_params("minmax", {"num_params": 1210, "mu": 0.1, "max_latency_s": 0.01})
    check_params("lyapunov", {"V": 50, "solver": "sweep"})  # an int is a valid float
    import numpy as np

    check_params("minmax", {"num_params": np.int64(7), "noise_std": np.float32(0.1)})
    with pytest.raises(ValueError, match="num_params: Input should be a valid integer"):
        check_params("minmax", {"num_params": 1.5})


def test_the_hierarchy_refuses_a_policy_that_needs_the_star_system(monkeypatch):
    from policies.best_channel import BestChannelPolicy
    from rayfl.registry import POLICIES

    class NeedsControls(BestChannelPolicy):
        uses_controls = True

    monkeypatch.setitem(POLICIES, "needs_controls", "x:y")
    monkeypatch.setattr(
        "rayfl.registry.load",
        lambda entry: NeedsControls if entry == "x:y" else None,
    )
    with pytest.raises(ConfigError) as error:
        load_config(HIER, {"scheduler.policy": "needs_controls"})
    assert "scheduler.policy=needs_controls sets per-client controls" in str(
        error.value
    )


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_output_dir_that_cannot_be_made_is_refused_even_for_root(tmp_path):
    # os.access says /proc is writable to root, but mkdir there fails: the
    # validator tries mkdir itself (the fuzz test met this as a crashed run)
    with pytest.raises(ConfigError) as error:
        load_config("examples/quickstart.yaml", {"output.dir": "/proc/rayfl-no/x"})
    assert "output.dir: cannot create a directory in /proc" in str(error.value)
    # a creatable one is accepted and the probe leaves nothing behind
    cfg = load_config("examples/quickstart.yaml", {"output.dir": str(tmp_path / "a")})
    assert cfg.output.dir == str(tmp_path / "a")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------
# Issue 36's config gaps: each refused at validation in one line, before Ray

HIER_DP = {"kind": "hierarchical", "num_edges": 2}
#: gap id -> (config, the one line the refusal prints); ``FILE`` is replaced by
#: a regular file's path.
CONFIG_GAPS = {
    "subchannels-per-edge-2^70": (
        {"topology": {**HIER_DP, "scheduling": {"subchannels_per_edge": 2**70}}},
        "topology.scheduling.subchannels_per_edge: Input should be less than or "
        f"equal to 100000 (got {2**70})",
    ),
    "h2fdp-dp-without-grad-bound": (
        {"topology": {**HIER_DP, "dp": {"grad_bound": None}}},
        "topology.dp.grad_bound is required when topology.dp.enabled is true "
        "(baseline h2fdp adds DP noise calibrated to G), got None",
    ),
    "no-noise-mechanism-with-noise-std": (
        {"privacy": {"mechanism": "none", "noise_std": 0.1}},
        "privacy.mechanism is 'none' (no noise) but the privacy section sets "
        "noise_std=0.1",
    ),
    "no-noise-mechanism-with-multiplier-and-epsilon": (
        {"privacy": {"noise_multiplier": 1.0, "epsilon": 2.0}},
        "sets noise_multiplier=1.0, epsilon=2.0",
    ),
    "gaussian-with-zero-multiplier": (
        {
            "privacy": {
                "mechanism": "gaussian",
                "clip_norm": 1.0,
                "noise_multiplier": 0,
            }
        },
        "privacy.noise_multiplier must be > 0",
    ),
    "rounds-true": ({"rounds": True}, "rounds must be a number, not a boolean"),
    "num-clients-true": (
        {"data": {"num_clients": True}},
        "data.num_clients must be a number, not a boolean (got True)",
    ),
    "local-epochs-true": (
        {"algorithm": {"local_epochs": True}},
        "algorithm.local_epochs must be a number, not a boolean (got True)",
    ),
    "data-root-is-a-file": (
        {"data": {"dataset": "mnist", "root": "FILE"}},
        "data.root must be a directory",
    ),
}


def _gap_config(config, a_file):
    """The config with ``"FILE"`` replaced by ``a_file``'s path."""
    if isinstance(config, dict):
        return {k: _gap_config(v, a_file) for k, v in config.items()}
    return str(a_file) if config == "FILE" else config


@pytest.mark.parametrize(
    ("config", "expected"), CONFIG_GAPS.values(), ids=CONFIG_GAPS.keys()
)
def test_config_gap_is_refused_by_load_config(config, expected, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory\n")
    with pytest.raises(ConfigError) as error:
        load_config(_gap_config(config, a_file))
    lines = str(error.value).splitlines()
    assert lines[0] == "invalid config:" and len(lines) == 2, lines
    assert expected in lines[1]


@pytest.mark.parametrize(
    ("config", "expected"), CONFIG_GAPS.values(), ids=CONFIG_GAPS.keys()
)
@pytest.mark.usefixtures("no_ray")
def test_config_gap_is_one_cli_line_and_no_run_directory(
    config, expected, tmp_path, capsys
):
    import yaml

    from rayfl.cli import main

    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory\n")
    path = tmp_path / "gap.yaml"
    path.write_text(yaml.safe_dump(_gap_config(config, a_file)))
    out = tmp_path / "runs"
    assert main(["run", str(path), f"output.dir={out}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "rayfl: invalid config:" and len(err) == 2, err
    assert expected in err[1] and "Traceback" not in err[1]
    assert not out.exists()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"topology": {**HIER_DP, "dp": {"grad_bound": None, "enabled": False}}}, 0),
        ({"topology": {**HIER_DP, "baseline": "hfl", "dp": {"grad_bound": None}}}, 0),
        ({"topology": {**HIER_DP, "scheduling": {"subchannels_per_edge": 10**5}}}, 0),
        ({"privacy": {"mechanism": "none", "clip_norm": 1.0, "max_uploads": 3}}, 0),
        ({"algorithm": {"kind": "sparse_dp"}, "privacy": {"delta": 1e-3}}, 0),
        ({"model": {"kind": "mlp", "hidden": [8]}, "algorithm": {"lr": 1}}, 0),
    ],
    ids=[
        "no-dp-without-grad-bound",
        "hfl-without-grad-bound",
        "subchannels-at-the-bound",
        "no-noise-clipping-and-t0",
        "sparse-dp-ledger-delta",
        "int-where-float",
    ],
)
def test_the_neighbours_of_each_gap_stay_valid(config, expected):
    assert load_config(config) is not None


def test_a_boolean_is_refused_by_every_number_field():
    """Every int/float leaf of every example config refuses ``true``."""
    import yaml

    examples = sorted(Path(__file__).parents[1].glob("examples/*.yaml"))
    checked = 0
    for path in examples:
        tree = yaml.safe_load(path.read_text())
        cfg = load_config(tree).to_dict()
        for field in _number_leaves(cfg):
            with pytest.raises(ConfigError) as error:
                load_config(tree, {field: True})
            message = str(error.value)
            # named, and refused as True (a Literal like qam_order lists its values)
            assert field in message and "(got True)" in message, message
            checked += 1
    assert checked > 100  # every section's numbers, not a handful


def _number_leaves(tree, prefix=""):
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and key not in ("sweep", "params"):
            yield from _number_leaves(value, f"{path}.")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            yield path
