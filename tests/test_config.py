import subprocess
import sys
from pathlib import Path

import pytest

from rayfl.config import ConfigError, RunConfig, load_config, parse_overrides

EXAMPLES = sorted(Path(__file__).parents[1].joinpath("examples").glob("*.yaml"))


def test_defaults_are_valid():
    cfg = load_config()
    assert isinstance(cfg, RunConfig)
    assert cfg.algorithm.kind == "fedavg"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_validates(path):
    load_config(path)


def test_overrides_types_and_nesting():
    cfg = load_config(
        {"rounds": 3},
        [
            "data.num_clients=8",
            "algorithm.kind=fedprox",
            "algorithm.mu=0.5",
            "ray.clients_per_actor=2",
            "model.hidden=[32, 16]",
        ],
    )
    assert cfg.data.num_clients == 8
    assert cfg.algorithm.kind == "fedprox" and cfg.algorithm.mu == 0.5
    assert cfg.ray.clients_per_actor == 2
    assert cfg.model.hidden == (32, 16)
    assert parse_overrides(["a.b=null"]) == {"a.b": None}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["rounds=0"], "rounds: Input should be greater than or equal to 1 (got 0)"),
        (["data.num_clients=-3"], "data.num_clients"),
        (
            ["model.kind=resnet"],
            "model.kind: unknown name 'resnet'\n  allowed: 'cnn', 'mlp', 'mlr'",
        ),
        (["algorithm.kind=sgd"], "'fedavg'"),
        (["algorithm.lr=-1"], "algorithm.lr: Input should be greater than 0"),
        (["data.bogus=1"], "data.bogus: unknown key; allowed keys: alpha,"),
        (["algorithm.bogus=1"], "algorithm.bogus: unknown key"),
        (["ray.clients_per_actor=0"], "ray.clients_per_actor"),
        (["scheduler.clients_per_round=50"], "must be <= data.num_clients"),
        (["privacy.delta=1.5"], "privacy"),
        (["rounds"], "must look like key.path=value"),
    ],
    ids=[
        "rounds-zero",
        "negative-clients",
        "bad-model",
        "bad-algorithm",
        "negative-lr",
        "unknown-key",
        "unknown-algo-key",
        "zero-packing",
        "k-gt-n",
        "bad-delta",
        "no-equals",
    ],
)
def test_errors_name_field_and_allowed_values(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    message = str(info.value)
    assert expected in message
    assert len(message.splitlines()) <= 6


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rounds: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_cli_prints_config_error_without_traceback(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("rounds: 2\ndata:\n  partition: zipf\n")
    proc = subprocess.run(
        [sys.executable, "-m", "rayfl.cli", "run", str(cfg), f"output.dir={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "data.partition" in proc.stderr and "'iid'" in proc.stderr
    assert "Traceback" not in proc.stderr
    # nothing half-written
    assert not any(p.is_dir() for p in tmp_path.iterdir())


def test_bench_example_matches_the_benchmark_workload():
    from rayfl.benchmarks.round_time import CONFIG

    example = Path(__file__).parents[1] / "examples" / "bench_fedavg_mlp.yaml"
    a = load_config(example).to_dict()
    b = load_config(CONFIG).to_dict()
    for key in ("rounds",):
        a.pop(key), b.pop(key)
    assert a == b


_HIER = {
    "data": {"num_clients": 8},
    "topology": {"kind": "hierarchical", "num_edges": 2, "tau": 3, "local_period": 3},
}
_D2D = {"data": {"num_clients": 6}, "topology": {"kind": "d2d", "target": 0}}


#: (base, the fields that named the policy before scheduler did, a policy + params,
#: the topology's default)
_TOPOLOGY_POLICY = {
    "hierarchical": (
        _HIER,
        ("topology.scheduling.policy", "topology.scheduling.params"),
        ("proportional_fair", {"window": 5}),
        "uniform",
    ),
    "d2d": (
        _D2D,
        ("topology.policy", "topology.policy_params"),
        ("channel_threshold", {"epsilon": 0.3}),
        "channel_threshold",
    ),
}


@pytest.mark.parametrize(
    ("base", "removed", "chosen", "default"),
    _TOPOLOGY_POLICY.values(),
    ids=_TOPOLOGY_POLICY.keys(),
)
def test_scheduler_policy_is_the_one_policy_field_of_every_topology(
    base, removed, chosen, default
):
    name, params = chosen
    cfg = load_config(base, {"scheduler.policy": name, "scheduler.params": params})
    assert (cfg.scheduler.policy, cfg.scheduler.params) == (name, params)
    assert load_config(cfg) == cfg  # a resolved config round-trips
    plain = load_config(base)
    assert (plain.scheduler.policy, plain.scheduler.params) == (default, {})
    for field, value in zip(removed, chosen, strict=True):
        with pytest.raises(ConfigError) as error:
            load_config(base, {field: value})
        new = "scheduler.params" if field.endswith("params") else "scheduler.policy"
        assert str(error.value).splitlines()[1:] == [
            f"  {field} is no longer read: give {new} (one field names the policy "
            "on every topology)"
        ]


@pytest.mark.parametrize(
    ("base", "name", "reason"),
    [
        (_HIER, "all", "is meant for topology.kind=star; got hierarchical"),
        (_D2D, "uniform", "needs action part 'participants'; topology.kind=d2d offers"),
        (RunConfig().to_dict(), "uniform", "is meant for topology.kind=hierarchical"),
    ],
    ids=["all-hierarchical", "uniform-d2d", "uniform-star"],
)
def test_scheduler_policy_refuses_another_topologys_policy_in_one_line(
    base, name, reason
):
    with pytest.raises(ConfigError) as error:
        load_config(base, {"scheduler.policy": name})
    _, *lines = str(error.value).splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"  scheduler.policy={name} {reason}"
    )


@pytest.mark.parametrize("policy", ["all", "random", "round_robin"])
@pytest.mark.parametrize("wireless", [None, {"num_subchannels": 2}])
def test_clients_per_round_in_the_params_is_refused_for_the_field(policy, wireless):
    config = {"wireless": wireless, "scheduler": {"policy": policy}}
    used = wireless is None or policy == "all"  # else the policy fills K
    with pytest.raises(ConfigError) as error:
        load_config(config, {"scheduler.params": {"clients_per_round": 1}})
    if used:
        assert load_config(config, {"scheduler.clients_per_round": 1})
        assert str(error.value).splitlines()[1:] == [
            "  scheduler.params.clients_per_round: set scheduler.clients_per_round "
            f"instead (it decides k for scheduler.policy={policy})"
        ]
    else:
        assert (
            str(error.value)
            .splitlines()[1]
            .startswith(
                f"  scheduler.params.clients_per_round is not used by "
                f"scheduler.policy={policy} with a wireless section"
            )
        )


def test_clients_per_round_with_a_channel_is_refused_where_it_is_not_used():
    """With wireless, only `all` takes a client count; other policies fill K."""
    base = {
        "data": {"dataset": "digits", "num_clients": 8},
        "wireless": {"num_subchannels": 3},
    }
    ok = load_config({**base, "scheduler": {"policy": "all", "clients_per_round": 2}})
    assert ok.scheduler.clients_per_round == 2
    for policy in ("random", "round_robin", "best_channel"):
        cfg = {**base, "scheduler": {"policy": policy, "clients_per_round": 2}}
        with pytest.raises(ConfigError) as error:
            load_config(cfg)
        lines = [x for x in str(error.value).splitlines() if "is not used by" in x]
        assert len(lines) == 1 and f"scheduler.policy={policy}" in lines[0]
    assert load_config({**base, "scheduler": {"policy": "random"}})  # no k: fine
