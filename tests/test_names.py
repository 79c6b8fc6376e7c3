"""Unknown names are rejected at validation, with "did you mean", before Ray starts."""

from __future__ import annotations

import pytest
import ray

import rayfl
from rayfl import cli
from rayfl.config import ConfigError, load_config
from rayfl.names import UnknownNameError, check_name, policy_names, suggest

QUICKSTART = "examples/quickstart.yaml"
SCHEDULING = "examples/scheduling_fmnist.yaml"

# (overrides, field, expected suggestion, a few allowed values that must be listed)
CASES = [
    (
        ["scheduler.policy=bestchannel"],
        "scheduler.policy",
        "best_channel",
        ["all", "lyapunov", "round_robin"],
    ),
    (
        ["scheduler.policy=Round-Robin"],
        "scheduler.policy",
        "round_robin",
        ["random", "minmax"],
    ),
    (
        ["algorithm.kind=fedavgg"],
        "algorithm.kind",
        "fedavg",
        ["ditto", "wpfl", "sparse_dp"],
    ),
    (["model.kind=MLP"], "model.kind", "mlp", ["mlr", "cnn"]),
    (
        ["data.dataset=fashion-mnist"],
        "data.dataset",
        "fashion_mnist",
        ["mnist", "digits", "cifar10"],
    ),
    (["data.partition=dirichlett"], "data.partition", "dirichlet", ["iid", "shards"]),
    (["rl.reward=min_max"], "rl.reward", "min_max_loss", ["jain", "latency"]),
    (["topology.kind=hierarchichal"], "topology.kind", "hierarchical", ["flat", "d2d"]),
    (
        ["topology.kind=hierarchical", "scheduler.policy=unifrom"],
        "scheduler.policy",
        "uniform",
        ["best_channel", "random"],
    ),
    (
        ["topology.kind=d2d", "scheduler.policy=chanel_threshold"],
        "scheduler.policy",
        "channel_threshold",
        ["random_neighbors"],
    ),
]


@pytest.mark.parametrize(
    ("overrides", "field", "close", "allowed"),
    CASES,
    ids=[c[1] + ("-" + c[0][-1].split("=")[1]) for c in CASES],
)
def test_unknown_name_names_field_suggests_and_lists(overrides, field, close, allowed):
    with pytest.raises(ConfigError) as info:
        load_config(QUICKSTART, overrides)
    message = str(info.value)
    bad = overrides[-1].split("=", 1)[1]
    assert f"{field}: unknown name {bad!r}" in message
    assert f"did you mean {close!r}" in message
    listed = [
        a.strip("'")
        for a in message.split("allowed: ", 1)[1].split("\n")[0].split(", ")
    ]
    assert set(allowed) <= set(listed)
    assert listed == sorted(listed)
    assert len(message.splitlines()) <= 4


def test_no_suggestion_when_nothing_is_close():
    with pytest.raises(ConfigError) as info:
        load_config(QUICKSTART, ["scheduler.policy=fifo"])
    message = str(info.value)
    assert "scheduler.policy: unknown name 'fifo'" in message
    assert "did you mean" not in message
    assert "allowed: 'age_based', 'all', 'best_channel'" in message


def test_policy_names_are_the_one_registry():
    from policies.registry import POLICIES, register_policy
    from rayfl.registry import POLICIES as REGISTRY

    assert POLICIES is REGISTRY
    names = policy_names()
    assert names == sorted(REGISTRY)
    assert {"all", "random", "round_robin", "uniform"} <= set(names)
    # a policy registered at run time is accepted at once
    register_policy("my_test_policy", "policies.best_channel:BestChannelPolicy")
    register_policy("my_client_set", "policies.random:RandomPolicy")
    try:
        cfg = load_config(SCHEDULING, ["scheduler.policy=my_test_policy"])
        assert cfg.scheduler.policy == "my_test_policy"
        # without a wireless section the name is known; the error says what is missing
        with pytest.raises(ConfigError, match="needs a `wireless` section"):
            load_config(
                QUICKSTART, ["wireless=null", "scheduler.policy=my_test_policy"]
            )
        # its declaration decides, not its name: a client-set rule runs without one
        no_channel = ["wireless=null", "scheduler.policy=my_client_set"]
        assert load_config(QUICKSTART, no_channel).scheduler.policy == "my_client_set"
    finally:
        POLICIES.pop("my_test_policy")
        POLICIES.pop("my_client_set")
    with pytest.raises(ConfigError, match="unknown name 'my_test_policy'"):
        load_config(SCHEDULING, ["scheduler.policy=my_test_policy"])


def test_every_registered_policy_name_validates_where_it_is_meant_to_run():
    from rayfl.registry import check_policy

    for name in policy_names():
        try:
            check_policy(name, topology="star")
        except ValueError as refusal:  # e.g. uniform (hierarchical), d2d-only rules
            with pytest.raises(ConfigError) as error:
                load_config(SCHEDULING, [f"scheduler.policy={name}"])
            assert str(refusal) in str(error.value)
            continue
        assert (
            load_config(SCHEDULING, [f"scheduler.policy={name}"]).scheduler.policy
            == name
        )


def test_suggest_ranks_spelling_variants_first():
    allowed = ["random", "round_robin", "random_neighbors", "best_channel"]
    assert suggest("RoundRobin", allowed)[0] == "round_robin"
    assert suggest("random-neighbours", allowed)[0] == "random_neighbors"
    assert suggest("zzz", allowed) == []
    assert len(suggest("rand", allowed + ["randn", "rando", "randy"], n=2)) == 2
    with pytest.raises(UnknownNameError) as info:
        check_name("x.y", "bset_channel", allowed)
    assert info.value.suggestions == ["best_channel"]
    assert info.value.allowed == sorted(allowed)
    assert check_name("x.y", "random", allowed) == "random"


@pytest.fixture
def no_ray(monkeypatch):
    """Fail the test if anything tries to start or join a Ray session."""
    calls = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: calls.append((a, k)))
    yield calls
    assert calls == [], "Ray was started"


def test_cli_rejects_unknown_policy_before_ray(capsys, no_ray):
    code = cli.main(["run", QUICKSTART, "scheduler.policy=bestchannel"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    assert (
        "scheduler.policy: unknown name 'bestchannel'; did you mean 'best_channel'?"
        in err
    )
    assert "wireless" not in err  # the old, wrong cause
    assert len(err.splitlines()) <= 4


def test_cli_compare_rejects_unknown_policy_before_ray(capsys, no_ray):
    code = cli.main(["compare", QUICKSTART, "--policies", "random,fifo", "rounds=1"])
    err = capsys.readouterr().err
    assert code == 2
    assert "scheduler.policy: unknown name 'fifo'" in err


def test_python_api_rejects_unknown_names_before_ray(no_ray):
    with pytest.raises(ConfigError, match=r"did you mean 'best_channel'\?"):
        rayfl.run(QUICKSTART, scheduler__policy="bestchannel")
    with pytest.raises(ConfigError, match=r"data.dataset: unknown name 'mnst'"):
        rayfl.run(QUICKSTART, data__dataset="mnst")


def test_known_policy_without_its_section_is_a_short_config_error(capsys, no_ray):
    # the quickstart has a channel model: drop it
    code = cli.main(
        ["run", QUICKSTART, "wireless=null", "scheduler.policy=best_channel"]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    assert "scheduler.policy=best_channel schedules subchannels" in err
    assert "`wireless` section" in err


def test_dataset_error_names_the_fields_to_change():
    from rayfl.data.datasets import DatasetError
    from rayfl.data.federated import build_federated

    cfg = load_config(QUICKSTART, ["data.num_clients=100"])
    with pytest.raises(DatasetError) as info:
        build_federated(cfg.data, seed=0)
    message = str(info.value)
    for field in (
        "data.num_clients (now 100)",
        "data.min_partition_size (now 10)",
        "data.alpha (now 0.5)",
    ):
        assert field in message
    # the README's Quick start size works with the example as shipped
    data = build_federated(
        load_config(QUICKSTART, ["data.num_clients=50"]).data, seed=0
    )
    assert len(data.num_train) == 50 and min(data.num_test) >= 1
