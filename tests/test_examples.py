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
    cfg = load_config(path, {**TINY, "output.dir": str(tmp_path)})
    if (
        cfg.data.dataset == "fashion_mnist"
        and not Path("/usr/share/datasets/fashion-mnist").is_dir()
    ):
        pytest.skip("dataset-fashion-mnist not installed")
    if cfg.wireless is not None and cfg.wireless.num_subchannels > 4:
        cfg = load_config(cfg, {"wireless.num_subchannels": 4})
    if cfg.topology.kind == "hierarchical":  # 4 devices: 2 edges of 2
        cfg = load_config(cfg, {"topology.num_edges": 2})
    if cfg.scheduler.clients_per_round:
        cfg = load_config(cfg, {"scheduler.clients_per_round": 2})
    if cfg.sweep:
        table, _ = sweep(cfg)
        assert len(table) >= 1
    else:
        result = rayfl.run(cfg)
        assert result.summary["status"] == "finished"
