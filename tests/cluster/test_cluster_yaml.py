"""cluster.yaml is a config `ray up` accepts (checked offline, no SSH, no cloud).

`ray up` resolves a config with ``prepare_config`` (defaults, the single node type
of an on-prem cluster) and then ``validate_config`` (jsonschema against
``ray/autoscaler/ray-schema.json`` plus Ray's own cross-field checks) before it
contacts any host; these tests run exactly those two steps on the shipped file and
on its commented AWS variant.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_YAML = ROOT / "cluster.yaml"
AWS_BEGIN = "# --- AWS variant (begin) ---"
AWS_END = "# --- AWS variant (end) ---"


def _load() -> dict:
    return yaml.safe_load(CLUSTER_YAML.read_text())


def _aws_variant() -> dict:
    text = CLUSTER_YAML.read_text()
    block = text.split(AWS_BEGIN, 1)[1].split(AWS_END, 1)[0]
    lines = []
    for line in block.strip("\n").splitlines():
        assert line == "#" or line.startswith("# "), (
            f"AWS variant line must start with '# ': {line!r}"
        )
        lines.append(line[2:])
    return yaml.safe_load("\n".join(lines))


def _ray_validate(config: dict) -> dict:
    """Run `ray up`'s offline resolution + validation; return the prepared config."""
    pytest.importorskip("jsonschema")
    util = pytest.importorskip("ray.autoscaler._private.util")
    prepared = util.prepare_config(config)
    util.validate_config(prepared)
    return prepared


def test_parses_with_required_keys() -> None:
    cfg = _load()
    # ray-schema.json: required = [cluster_name, provider]; provider.type required.
    assert cfg["cluster_name"]
    assert cfg["provider"]["type"] == "local"
    assert isinstance(cfg["provider"]["head_ip"], str)
    assert isinstance(cfg["provider"]["worker_ips"], list)
    assert cfg["auth"]["ssh_user"]
    for key in (
        "setup_commands",
        "head_start_ray_commands",
        "worker_start_ray_commands",
    ):
        assert isinstance(cfg[key], list) and cfg[key], key
    # prepare_local aborts on these for provider "local".
    for key in ("head_node", "worker_nodes", "available_node_types"):
        assert key not in cfg


def test_top_level_keys_are_in_rays_schema() -> None:
    import json

    import ray.autoscaler

    schema_path = Path(ray.autoscaler.__file__).parent / "ray-schema.json"
    schema = json.loads(schema_path.read_text())
    for key in schema["required"]:
        assert key in _load()
    unknown = set(_load()) - set(schema["properties"])
    assert not unknown, f"keys unknown to ray-schema.json: {sorted(unknown)}"


def test_validates_as_ray_up_does() -> None:
    prepared = _ray_validate(_load())
    node_types = prepared["available_node_types"]
    assert prepared["head_node_type"] in node_types
    (node_type,) = node_types.values()
    workers = len(_load()["provider"]["worker_ips"])
    assert node_type["min_workers"] == node_type["max_workers"] == workers


def test_aws_variant_validates() -> None:
    aws = _aws_variant()
    assert aws["provider"]["type"] == "aws"
    _ray_validate(aws)


@pytest.mark.parametrize("variant", ["local", "aws"])
def test_nothing_public_and_rayfl_installed(variant: str) -> None:
    cfg = _load() if variant == "local" else _aws_variant()
    head = " ".join(cfg["head_start_ray_commands"])
    worker = " ".join(cfg["worker_start_ray_commands"])
    # The dashboard listens on loopback only (reach it through an SSH tunnel).
    assert re.search(r"--dashboard-host[= ]127\.0\.0\.1", head)
    assert "0.0.0.0" not in head + worker
    assert "--head" in head and "--port=6379" in head
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head
    assert "--address=$RAY_HEAD_IP:6379" in worker
    setup = cfg["setup_commands"]
    torch = next(i for i, c in enumerate(setup) if "torch==2.13.0" in c)
    rayfl = next(i for i, c in enumerate(setup) if "pip install" in c and "rayfl" in c)
    assert torch < rayfl, "the CPU torch build must be installed before rayfl"
    assert any("ray[default]==" in c for c in setup)
    assert any("RAY_AUTH_MODE=token" in c for c in setup)
    assert "~/.ray/auth_token" in cfg["file_mounts"]
