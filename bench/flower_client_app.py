"""Flower side of ``bench/flower_compare.py``: runs only in ``bench/_flower_venv``.

Issue 12's reference workload in Flower's Message API (flwr >= 1.21): real
Fashion-MNIST parsed from ``/usr/share/datasets/fashion-mnist/*.gz`` with numpy
(no downloads), the 70k pool shuffled and split iid into 100 clients x 600 train
samples, MLP 784-200-10, batch 32, one local epoch, SGD lr 0.05, FedAvg with
every client every round and no federated evaluation. A FedAvg subclass stamps
the time at each ``aggregate_train``; the seconds per round are the gaps between
consecutive stamps (round 1, with actor start-up, is dropped as warm-up).

Run (what flower_compare.py does):
    bench/_flower_venv/bin/python bench/flower_client_app.py --rounds 5 [--client-cpus 1]
Prints one JSON line prefixed ``FLOWER_RESULT``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np
import torch
from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

DATA_DIR = Path("/usr/share/datasets/fashion-mnist")
NUM_CLIENTS, PER_CLIENT, BATCH, LR = 100, 600, 32, 0.05
_CACHE: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # per Ray actor process


def _idx(name: str) -> np.ndarray:
    """One IDX file (gzip) as a numpy array: magic byte 3 is ndim, then big-endian dims."""
    with gzip.open(DATA_DIR / f"{name}.gz", "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = np.frombuffer(raw, ">i4", ndim, 4)
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def client_data(cid: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Client ``cid``'s 600 iid train samples of the merged 70k pool (seed 0)."""
    if not _CACHE:
        x = np.concatenate(
            [_idx("train-images-idx3-ubyte"), _idx("t10k-images-idx3-ubyte")]
        )
        y = np.concatenate(
            [_idx("train-labels-idx1-ubyte"), _idx("t10k-labels-idx1-ubyte")]
        )
        perm = np.random.default_rng(0).permutation(len(y))[: NUM_CLIENTS * PER_CLIENT]
        xs = torch.from_numpy(x[perm].reshape(-1, 784).astype(np.float32) / 255.0)
        ys = torch.from_numpy(y[perm].astype(np.int64))
        _CACHE["all"] = (xs, ys)
    xs, ys = _CACHE["all"]
    part = slice(cid * PER_CLIENT, (cid + 1) * PER_CLIENT)
    return xs[part], ys[part]


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(784, 200), torch.nn.ReLU(), torch.nn.Linear(200, 10)
    )


client_app = ClientApp()


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    """One local epoch of minibatch SGD on this node's partition."""
    model = make_model()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    x, y = client_data(int(context.node_config["partition-id"]))
    opt = torch.optim.SGD(model.parameters(), lr=float(msg.content["config"]["lr"]))
    perm = torch.randperm(len(y))
    for i in range(0, len(y), BATCH):
        idx = perm[i : i + BATCH]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
    metrics = MetricRecord({"train_loss": loss.detach().item(), "num-examples": len(y)})
    content = RecordDict(
        {"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}
    )
    return Message(content=content, reply_to=msg)


class TimedFedAvg(FedAvg):
    """FedAvg that records ``time.perf_counter()`` after each round's aggregation."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.stamps: list[float] = []

    def aggregate_train(self, server_round, replies):
        out = super().aggregate_train(server_round, replies)
        self.stamps.append(time.perf_counter())
        return out


def make_server_app(rounds: int, report: dict) -> ServerApp:
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        strategy = TimedFedAvg(
            fraction_train=1.0,
            fraction_evaluate=0.0,
            min_train_nodes=NUM_CLIENTS,
            min_available_nodes=NUM_CLIENTS,
        )
        t0 = time.perf_counter()
        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(make_model().state_dict()),
            num_rounds=rounds,
            train_config=ConfigRecord({"lr": LR}),
        )
        stamps = [t0, *strategy.stamps]
        report["round_s"] = [
            b - a for a, b in zip(stamps[:-1], stamps[1:], strict=True)
        ]

    return server_app


def main() -> None:
    # Import this file by module name so Ray pickles the ClientApp by reference and
    # each actor keeps its data cache (a ``__main__`` function is pickled by value).
    import flower_client_app as mod
    import flwr
    import ray
    from flwr.simulation import run_simulation

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="including 1 warm-up")
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument(
        "--client-cpus",
        type=float,
        default=None,
        help="client_resources num_cpus (default: Flower's own)",
    )
    args = parser.parse_args()
    backend: dict = {"init_args": {"num_cpus": args.cpus}}
    if args.client_cpus is not None:
        backend["client_resources"] = {"num_cpus": args.client_cpus, "num_gpus": 0.0}
    report: dict = {}
    run_simulation(
        server_app=make_server_app(args.rounds, report),
        client_app=mod.client_app,
        num_supernodes=NUM_CLIENTS,
        backend_config=backend,
    )
    rounds = report.get("round_s", [])
    report.update(
        flwr=flwr.__version__,
        ray=ray.__version__,
        torch=torch.__version__,
        client_cpus=args.client_cpus,
        warmup_s=rounds[0] if rounds else None,
        s_per_round=float(np.median(rounds[1:])) if len(rounds) > 1 else None,
    )
    print("FLOWER_RESULT " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
