"""Smoke runs of every example on a tiny budget (STYLE.md rule 35); slow."""

from pathlib import Path

import pytest

import rayfl
from rayfl.compare import sweep
from rayfl.config import load_config

EXAMPLES = sorted(Path(__file__).parents[1].joinpath("examples").glob("*.yaml"))
TINY = {"rounds": 2, "data.num_clients": 4, "output.progress": False, "eval_every": 1}


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_smoke(ray_session, tmp_path, path):
    full = load_config(path)  # the example as shipped must be valid
    shrink: dict = {**TINY, "output.dir": str(tmp_path)}
    if full.wireless is not None and full.wireless.num_subchannels > 4:
        shrink["wireless.num_subchannels"] = 4
    if full.topology.kind == "hierarchical":  # 4 devices: 2 edges of 2
        shrink["topology.num_edges"] = 2
    if full.scheduler.clients_per_round:
        shrink["scheduler.clients_per_round"] = 2
    if full.data.client_sizes:  # the first 4 clients' sizes
        shrink["data.client_sizes"] = full.data.client_sizes[:4]
    cfg = load_config(path, shrink)
    if (
        cfg.data.dataset == "fashion_mnist"
        and not Path("/usr/share/datasets/fashion-mnist").is_dir()
    ):
        pytest.skip("dataset-fashion-mnist not installed")
    if cfg.sweep:
        table, _ = sweep(cfg)
        assert len(table) >= 1
    else:
        result = rayfl.run(cfg)
        assert result.summary["status"] == "completed"
