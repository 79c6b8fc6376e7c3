"""The adjacency a run claims matches what its mechanism really releases.

``rayfl.privacy.sensitivity.adjacency`` decides it from the config. The oracles
here look at the mechanism instead:

* the uplink: every registered algorithm trains four clients of unequal
  abs(D_n) in a real client host, and the aggregation weights the host hands to
  the server are inspected. A weight that varies with abs(D_n) (sent in the
  clear) changes when a record is added or removed, so the claim must be
  replace-one; equal weights must not narrow it. Flipping Ditto's
  ``aggregation`` flips both.
* the scheduler: every star policy decides on observations that differ only in
  ``data_size`` (or only in ``loss``); a policy whose schedule changes with
  them releases abs(D_n) (or the un-noised loss), so the claim must say so.
* the summary: a real run writes the claim into ``summary.json``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from rayfl.actors.client import ClientHost
from rayfl.actors.setup import ActorSetup
from rayfl.algorithms.registry import ALGORITHMS, make_algorithm
from rayfl.config import load_config
from rayfl.data.federated import build_federated
from rayfl.privacy.sensitivity import (
    ADJACENCY_CLIENT,
    ADJACENCY_NONE,
    ADJACENCY_REPLACE_ONE,
    NO_DP,
    adjacency,
)
from rayfl.system import initial_vector

DP = {"mechanism": "gaussian", "clip_norm": 1.0, "noise_multiplier": 1.0}
BASE = {
    "data": {"dataset": "digits", "num_clients": 4, "partition": "size_skew"},
    "model": {"kind": "mlr"},
    "algorithm": {"local_steps": 2, "batch_size": 8, "lr": 0.1},
    "privacy": DP,
}


def _config(kind: str, **algorithm):
    tree = {**BASE, "algorithm": {**BASE["algorithm"], "kind": kind, **algorithm}}
    if kind == "sparse_dp":  # its DP-SGD is the mechanism; privacy.mechanism none
        tree["privacy"] = {}
    if kind == "wpfl":  # the paper's quantized uplink; no downlink channel here
        tree["algorithm"]["downlink_bits"] = None
        tree["privacy"] = {**DP, "mechanism": "quantized_gaussian"}
    return load_config(tree)


def _uploaded_weights(cfg):
    """Train every client once in a client host; return (weights sent, abs(D_n))."""
    data = build_federated(cfg.data, seed=cfg.seed)
    setup = ActorSetup.from_config(
        cfg,
        input_shape=tuple(data.input_shape),
        num_classes=data.num_classes,
        noise_std=1.0,
    )
    start = initial_vector(cfg, tuple(data.input_shape), data.num_classes)
    clients = list(range(cfg.data.num_clients))
    algorithm = make_algorithm(cfg.algorithm)
    downloads = None
    if algorithm.personalized_downloads:  # FedAMP, APPLE: the server's first send
        downloads = algorithm.server_downloads(0, start, {}, clients, len(clients))
    host = ClientHost(data, clients, setup)
    _, uploads, _ = host.train(0, start, clients, downloads=downloads)
    return np.asarray(uploads.weights, dtype=np.float64), np.asarray(data.num_train)


CASES = [(kind, {}) for kind in ALGORITHMS] + [
    ("ditto", {"aggregation": "data_weighted"}),
    ("wpfl", {"aggregation": "data_weighted"}),
]


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize(
    ("kind", "algorithm"),
    CASES,
    ids=[k + "".join(f"-{v}" for v in a.values()) for k, a in CASES],
)
def test_a_weight_that_reveals_the_data_size_makes_the_claim_replace_one(
    kind, algorithm
):
    # Arrange
    cfg = _config(kind, **algorithm)
    # Act: what the client host hands to the server
    weights, sizes = _uploaded_weights(cfg)
    claim = adjacency(cfg)
    # Assert
    assert len(set(sizes.tolist())) == len(sizes)  # the oracle can see a dependence
    reveals = not np.all(weights == weights[0])
    if reveals:
        np.testing.assert_array_equal(weights, sizes)  # abs(D_n), in the clear
        assert claim.relation == ADJACENCY_REPLACE_ONE, claim
        assert "aggregation weight" in claim.reason
    else:
        assert "aggregation weight" not in claim.reason
        assert claim.relation == ADJACENCY_CLIENT, claim


@pytest.mark.usefixtures("ray_session")
def test_flipping_dittos_weighting_flips_the_weights_and_the_claim():
    uniform, weighted = _config("ditto"), _config("ditto", aggregation="data_weighted")
    w_uniform, sizes = _uploaded_weights(uniform)
    w_weighted, _ = _uploaded_weights(weighted)
    assert np.all(w_uniform == 1.0)
    np.testing.assert_array_equal(w_weighted, sizes)
    assert adjacency(uniform).relation == ADJACENCY_CLIENT
    assert adjacency(weighted).relation == ADJACENCY_REPLACE_ONE
    # central DP: the server's noise std σ·max w/Σw then depends on abs(D_n) too
    central = weighted.model_copy(
        update={"privacy": weighted.privacy.model_copy(update={"placement": "cloud"})}
    )
    assert "noise scales" in adjacency(central).reason


def _star_policies():
    from policies import POLICIES
    from policies.registry import policy_class
    from rayfl.registry import check_policy

    names = []
    for name in sorted(POLICIES):
        try:
            check_policy(name, topology="star", parts={"assignment"})
        except ValueError:  # another topology's policy
            continue
        if "assignment" in policy_class(name).action_parts:
            names.append(name)
    return names


def _changes_the_schedule(name: str, key: str) -> bool:
    """Whether ``name``'s action changes when only ``obs[key]`` changes."""
    from policies import make_policy
    from tests.policies.helpers import make_spaces, sample_observation

    observation_space, action_space = make_spaces(8, 3, None)
    observation_space.seed(1)
    rng = np.random.default_rng(2)
    policy = make_policy(name, (observation_space, action_space))
    for _ in range(6):
        obs = sample_observation(observation_space, rng)
        other = {**obs, key: (obs[key] * rng.uniform(0.1, 10.0, obs[key].shape))}
        other[key] = other[key].astype(obs[key].dtype)
        policy.reset(seed=3)
        first = policy(obs)
        policy.reset(seed=3)
        if not np.array_equal(np.asarray(first), np.asarray(policy(other))):
            return True
    return False


@pytest.mark.parametrize("name", _star_policies())
def test_a_schedule_that_depends_on_the_data_is_in_the_claim(name):
    # Arrange: uniform weights and the accountant, so only the scheduler narrows
    cfg = load_config(
        {
            **BASE,
            "data": {**BASE["data"], "num_clients": 8},
            "algorithm": {"kind": "ditto", "aggregation": "uniform"},
            "wireless": {"num_subchannels": 3},
            "scheduler": {"policy": name},
        }
    )
    # Act
    by_loss = _changes_the_schedule(name, "loss")
    by_size = _changes_the_schedule(name, "data_size")
    claim = adjacency(cfg)
    # Assert: a dependence the oracle sees is never left out of the claim
    if by_loss:
        assert claim.relation == ADJACENCY_NONE, claim
    elif by_size:
        assert claim.relation == ADJACENCY_REPLACE_ONE, claim
        assert "data_size" in claim.reason
    else:
        assert claim.relation == ADJACENCY_CLIENT, claim


def test_the_hierarchy_claims_replace_one_while_sizes_set_the_weights_or_sigma():
    hier = {"kind": "hierarchical", "num_edges": 2}
    base = load_config({"topology": {**hier, "dp": {"calibration_sample_rate": 0.1}}})
    weighted = load_config(
        {
            "topology": {
                **hier,
                "weighting": "data_size",
                "dp": {"calibration_sample_rate": 0.1},
            }
        }
    )
    default_q = load_config({"topology": hier})
    no_dp = load_config({"topology": {**hier, "baseline": "hfl"}})
    assert adjacency(base).relation == ADJACENCY_CLIENT
    assert adjacency(weighted).relation == ADJACENCY_REPLACE_ONE
    assert "weighting=data_size" in adjacency(weighted).reason
    assert adjacency(default_q).relation == ADJACENCY_REPLACE_ONE
    assert adjacency(no_dp).relation == NO_DP


def test_poisson_dp_sgd_with_a_released_size_states_the_group_privacy_cost():
    claim = adjacency(_config("sparse_dp"))
    assert claim.relation == ADJACENCY_REPLACE_ONE
    assert "(2 epsilon, (1 + e^epsilon) delta) by group privacy" in claim.reason


def test_the_paper_epsilon_is_in_the_privacy_block_not_a_column():
    from types import SimpleNamespace

    from rayfl.engine.rows import client_rows, privacy_block
    from rayfl.system import RoundResult
    from rayfl.uplink import UplinkModel

    # Arrange: DP-Ditto's eq. 8 calibration, every client's one planned upload
    cfg = load_config(
        {
            **BASE,
            "rounds": 1,
            "algorithm": {"kind": "ditto"},
            "privacy": {
                "mechanism": "gaussian",
                "clip_norm": 1.0,
                "epsilon": 10.0,
                "calibration": "dp_ditto",
            },
        }
    )
    uplink = UplinkModel(cfg, num_train=[50, 60, 70, 80], model_dim=10)
    uplink.record_releases([0, 1, 2, 3])
    system = SimpleNamespace(config=cfg, uplink=uplink)
    # Act
    eps, _ = uplink.epsilons(evaluate=True)
    privacy = privacy_block(system, eps)
    rows = client_rows(0, 4, RoundResult(round=0, rows=[], delivered=[]), None, eps)
    # Assert: at its planned uploads eq. 8's nominal ε is its target
    np.testing.assert_allclose(privacy["paper_epsilon_per_client"], [10.0] * 4)
    assert privacy["epsilon_max"] > 10.0  # the spent ε is the ledger's
    assert privacy["adjacency"] == adjacency(cfg).relation == ADJACENCY_REPLACE_ONE
    assert privacy["ledger_adjacency"] == ADJACENCY_CLIENT  # the noise alone
    assert "epsilon" in rows[0] and not any("nominal" in k for k in rows[0])


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_summary_json_states_the_claim_and_no_paper_epsilon_column(tmp_path):
    import pandas as pd

    import rayfl

    cfg = load_config(
        {
            **BASE,
            "rounds": 1,
            "algorithm": {"kind": "ditto", "local_steps": 1, "batch_size": 8},
            "privacy": {  # DP-Ditto: the paper's σ_n from abs(D_n) (eq. 8)
                "mechanism": "gaussian",
                "clip_norm": 1.0,
                "epsilon": 10.0,
                "calibration": "dp_ditto",
            },
            "output": {"dir": str(tmp_path), "progress": False, "plots": False},
        }
    )
    result = rayfl.run(cfg)
    privacy = json.loads((result.run_dir / "summary.json").read_text())["privacy"]
    claim = adjacency(cfg)
    assert privacy["adjacency"] == claim.relation == ADJACENCY_REPLACE_ONE
    assert privacy["adjacency_reason"] == claim.reason
    assert privacy["ledger_adjacency"] == ADJACENCY_CLIENT  # the noise alone
    # the paper's ε: every client made its one planned upload, so eq. 8's target
    np.testing.assert_allclose(privacy["paper_epsilon_per_client"], [10.0] * 4)
    assert privacy["epsilon_max"] > 10.0  # the spent ε is the ledger's, not it
    columns = pd.read_parquet(result.run_dir / "metrics.parquet").columns
    assert "epsilon" in columns and "epsilon_nominal" not in columns


DP_OVERRIDES = [f"privacy.{k}={v}" for k, v in DP.items()]


def _docs_rows():
    """The rows of docs/privacy.md's adjacency table: (algorithm, overrides, claim)."""
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs/privacy.md").read_text()
    table = text.split('<!-- table static="adjacency per algorithm')[1]
    table = table.split("<!-- /table -->")[0]
    rows = []
    for line in table.splitlines()[3:]:
        algorithm, config, relation, _ = (c.strip() for c in line.strip("|").split("|"))
        words = config.replace("`", "").split()
        overrides = words[1:] if words[0] == "DP" else words
        if words[0] == "DP":
            mechanism = "quantized_gaussian" if "kind=wpfl" in config else "gaussian"
            overrides = [
                *DP_OVERRIDES,
                f"privacy.mechanism={mechanism}",
                *overrides,
            ]
        rows.append((algorithm, overrides, relation))
    return rows


@pytest.mark.parametrize(
    ("algorithm", "overrides", "relation"), _docs_rows(), ids=lambda v: str(v)[:40]
)
def test_every_row_of_the_docs_table_is_what_adjacency_says(
    algorithm, overrides, relation
):
    assert adjacency(load_config(None, overrides)).relation == relation, algorithm


def test_the_docs_table_names_every_registered_algorithm():
    text = " ".join(row[0] for row in _docs_rows()).lower().replace("-", "")
    names = {"sparse_dp": "dpsparfl", "perfedavg": "perfedavg", "pfedme": "pfedme"}
    for kind in ALGORITHMS:
        assert names.get(kind, kind) in text, kind
    assert "pfedwn" in text and "h2fdp" in text
