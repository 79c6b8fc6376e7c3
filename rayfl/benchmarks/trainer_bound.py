"""The star lanes' arithmetic bound: their hosts' training and evaluation alone.

A lockstep step of E star lanes (:mod:`rayfl.star.columns`) trains K clients
per lane and evaluates every client's test split under each lane's new model;
the rest (the driver's decisions, channel, exact sums, observations, Ray calls)
is overhead. :func:`trainer_bound` runs that training and evaluation for E
lanes in this process, with the hosts' own functions
(:func:`rayfl.learning.vectorized.local_sgd_many` in chunks of
:data:`rayfl.actors.client.TRAIN_CHUNK` clients, with the run-level batch slot,
and :func:`rayfl.learning.segment_eval.evaluate_segments_many`), on the env's
real data and model, and returns the steps per second the lanes would reach
if that were all the work and it were split perfectly over ``cores`` cores:
E / (CPU seconds / cores). ``rayfl bench env --mode emulate`` writes it as
the ``trainer-bound`` rows, beside the lanes' measured rate.

Lane e schedules clients (e·K + j) mod N, j < K: every client as often.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

__all__ = ["trainer_bound"]


def trainer_bound(
    config: Any, lanes: int, *, cores: int = 2, repeats: int = 3
) -> float:
    """Steps/s of ``lanes`` star lanes if their hosts' training and evaluation were all.

    Args:
        config: The env's run config (star topology, FedAvg/FedProx, MLR/MLP).
        lanes: E.
        cores: Cores the work is split over (the hosts).
        repeats: Timed repeats; the fastest counts.

    Returns:
        E / (CPU seconds of one step's training and evaluation / ``cores``).
    """
    from rayfl.actors.client import TRAIN_CHUNK
    from rayfl.data.federated import build_federated
    from rayfl.learning.models import FlatModel, build_model
    from rayfl.learning.segment_eval import evaluate_segments_many
    from rayfl.learning.vectorized import local_sgd_many
    from rayfl.seeding import rng_for_many
    from rayfl.system import initial_vector

    data = build_federated(config.data, seed=config.seed)
    n, k = data.num_clients, config.wireless.num_subchannels
    model = FlatModel(
        build_model(
            config.model.kind,
            input_shape=tuple(data.input_shape),
            num_classes=data.num_classes,
            hidden=config.model.hidden,
        )
    )
    start = initial_vector(config, tuple(data.input_shape), data.num_classes)
    clients = (np.arange(lanes * k) % n).tolist()
    datasets = [data.train(c) for c in clients]
    algo = config.algorithm
    slot = min(algo.batch_size, max(int(v) for v in data.num_train))
    tests = [data.test(c) for c in range(n)]
    x = np.concatenate([np.asarray(t[0]) for t in tests])
    y = np.concatenate([np.asarray(t[1]) for t in tests])
    bounds = np.concatenate([[0], np.cumsum([len(t[1]) for t in tests])])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    best = np.inf
    try:
        for _ in range(repeats):
            t0 = time.process_time()
            rngs = rng_for_many(config.seed, "batch", rounds=0, clients=clients)
            vectors = np.empty((len(clients), len(start)), np.float32)
            for first in range(0, len(clients), TRAIN_CHUNK):
                part = slice(first, first + TRAIN_CHUNK)
                results = local_sgd_many(
                    model,
                    np.tile(start, (len(datasets[part]), 1)),
                    datasets[part],
                    lr=algo.lr,
                    batch_size=algo.batch_size,
                    local_epochs=algo.local_epochs,
                    local_steps=algo.local_steps,
                    rngs=rngs[part],
                    slot=slot,
                )
                for i, result in enumerate(results, start=first):
                    vectors[i] = result.vector
            means = vectors.reshape(lanes, k, -1).mean(axis=1)
            evaluate_segments_many(model, means, x, y, bounds)
            best = min(best, time.process_time() - t0)
    finally:
        torch.set_num_threads(threads)
    return lanes / (best / cores)
