"""The D2D client actor: a client actor that trains, mixes and sends own models.

No server: a :class:`ClientHost` whose clients keep their own models.

Thin shell (STYLE.md rule 7) over the client actor of the star topology: the
federated baselines reuse ``ClientHost.train`` unchanged; pFedWN adds

* :meth:`D2DClientHost.train_models`: one local run of each listed client's own
  model (``"local"``: the pure local model a neighbor sends; ``"personal"``: a
  target's personalized model); the trained vectors are returned as one dict, so
  the driver forwards its ObjectRef — never the arrays — to the targets;
* :meth:`D2DClientHost.em_update`: E/M steps on the target's train split with the
  received neighbor models (:mod:`rayfl.algorithms.pfedwn`);
* :meth:`D2DClientHost.target_round`: eq. 1 then a local epoch at the target,
  evaluated after each;
* :meth:`D2DClientHost.aggregate_group`: the target as the (virtual) aggregator of
  a federated baseline over its group (``ServerHost.aggregate``).

Every method that reads the hosted clients' state (models, group servers) is
``@needs_state`` (:mod:`rayfl.actors.restart`): a host Ray restarted refuses it
until the driver gives the state back; ``em_update`` reads only the data and the
models it is sent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import ray
import torch
import torch.nn.functional as F

from rayfl.actors.client import ClientHost
from rayfl.actors.cloud import REJECT_NON_FINITE, LinkOutcome, ServerHost
from rayfl.actors.messages import Uploads
from rayfl.actors.restart import needs_state
from rayfl.actors.setup import ActorSetup
from rayfl.algorithms.pfedwn import aggregate_target, em_step
from rayfl.learning.train import evaluate
from rayfl.learning.vectorized import per_client_trainer
from rayfl.seeding import rng_for

__all__ = ["D2DClientActor", "D2DClientHost"]

Vector = npt.NDArray[np.float32]
_RNG_PURPOSE = {"local": "batch", "personal": "d2d_personal_batch"}


class D2DClientHost(ClientHost):
    """Hosts 1..M D2D clients; each keeps its own model(s) in ``state``.

    Per-client state keys: ``"local"`` (pure local model), ``"personal"`` (a
    target's model), ``"local_updates"`` (counter).
    """

    def _train_one(
        self, round: int, client: int, key: str, init: Vector
    ) -> tuple[Vector, dict[str, float]]:
        cfg = self.setup.algorithm
        state = self.state[client]
        x, y = self.data.train(client)
        result = per_client_trainer(cfg.trainer)(
            self.model,
            state.get(key, init),
            x,
            y,
            lr=cfg.lr,
            batch_size=cfg.batch_size,
            local_epochs=cfg.local_epochs,
            local_steps=cfg.local_steps,
            rng=rng_for(self.setup.seed, _RNG_PURPOSE[key], round=round, client=client),
        )
        state[key] = result.vector
        state["local_updates"] = state.get("local_updates", 0) + 1
        return result.vector, {"train_loss": result.train_loss}

    @needs_state
    def train_models(
        self, round: int, clients: list[int], key: str, init: Vector
    ) -> tuple[list[dict[str, float]], dict[int, Vector]]:
        """Train each client's ``key`` model one local run and return the models.

        Args:
            round: Round index t.
            clients: Client ids hosted here.
            key: ``"local"`` or ``"personal"``.
            init: ω⁰, the common initial model (a client's first start point).

        Returns:
            One record per client and ``{client: trained vector}``.
        """
        records, models = [], {}
        for client in clients:
            vector, metrics = self._train_one(round, client, key, init)
            models[client] = vector
            records.append({"client": client, **metrics})
        return records, models

    @needs_state
    def current_models(
        self, clients: list[int], key: str, init: Vector
    ) -> dict[int, Vector]:
        """Return the clients' current ``key`` models (ω⁰ if never trained)."""
        return {c: self.state[c].get(key, init) for c in clients}

    def em_update(
        self,
        target: int,
        neighbors: list[int],
        sources: list[int],
        log_weights: npt.NDArray[np.float64],
        steps: int,
        *model_dicts: dict[int, Vector],
    ) -> tuple[npt.NDArray[np.float64], float]:
        """Run ``steps`` E/M steps (eqs. 9–10) on the target's train split.

        Args:
            target: The target n (hosted here).
            neighbors: The neighbors whose models are the mixture components.
            sources: For each neighbor, the index of the dict holding its model.
            log_weights: Current log π over ``neighbors``.
            steps: E/M steps.
            *model_dicts: Dicts holding every neighbor's model.

        Returns:
            The new log π and the mean log-likelihood before the last step.
        """
        models = _lookup(neighbors, sources, model_dicts)
        x, y = self.data.train(target)
        losses = np.stack([self._sample_losses(v, x, y) for v in models], axis=1)
        log_pi = np.asarray(log_weights, dtype=np.float64)
        loglik = float("nan")
        for _ in range(steps):
            log_pi, loglik = em_step(log_pi, losses)
        return log_pi, loglik

    def _sample_losses(
        self, vector: Vector, x: npt.NDArray[np.float32], y: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """Per-sample cross-entropy −log p(y_i|x_i; ω) (eq. 8), model in eval mode."""
        self.model.load(vector)
        self.model.module.eval()
        out = []
        with torch.no_grad():
            xt, yt = torch.from_numpy(np.asarray(x)), torch.from_numpy(np.asarray(y))
            for start in range(0, len(y), 2048):
                logits = self.model.module(xt[start : start + 2048])
                out.append(
                    F.cross_entropy(logits, yt[start : start + 2048], reduction="none")
                )
        self.model.module.train()
        return torch.cat(out).double().numpy()

    @needs_state
    def target_round(
        self,
        round: int,
        target: int,
        neighbors: list[int],
        sources: list[int],
        weights: list[float],
        alpha: float,
        init: Vector,
        *model_dicts: dict[int, Vector],
    ) -> dict[str, Any]:
        """Aggregate (eq. 1), evaluate, train one local run, evaluate.

        Args:
            round: Round index t.
            target: The target n (hosted here).
            neighbors: Neighbors whose model arrived this round.
            sources: For each neighbor, the index of the dict holding its model.
            weights: Their π (renormalised inside eq. 1).
            alpha: α of eq. 1 (1 and no neighbors: pure local training).
            init: ω⁰.
            *model_dicts: Dicts holding every arrived neighbor's model.

        Returns:
            ``post_agg_acc``/``post_agg_loss``, ``post_train_acc``/
            ``post_train_loss`` on the target's test split, ``train_loss``, and
            ``rejected``: neighbor → reason for arrived models left out of eq. 1
            (``non_finite``: NaN or ±inf).
        """
        own = self.state[target].get("personal", init)
        models = _lookup(neighbors, sources, model_dicts)
        finite = [bool(np.all(np.isfinite(m))) for m in models]
        rejected = {
            int(m): REJECT_NON_FINITE
            for m, ok in zip(neighbors, finite, strict=True)
            if not ok
        }
        if rejected:  # a diverged neighbor must not poison the target's model
            keep = np.flatnonzero(finite)
            models = models[keep]
            weights = [weights[i] for i in keep]
        mixed = aggregate_target(own, models, weights, alpha=alpha)
        self.state[target]["personal"] = mixed
        x_te, y_te = self.data.test(target)
        agg_loss, agg_acc = evaluate(self.model, mixed, x_te, y_te)
        trained, metrics = self._train_one(round, target, "personal", init)
        loss, acc = evaluate(self.model, trained, x_te, y_te)
        return {
            "client": target,
            "post_agg_acc": agg_acc,
            "post_agg_loss": agg_loss,
            "post_train_acc": acc,
            "post_train_loss": loss,
            "rejected": rejected,
            **metrics,
        }

    def _group_server(self, target: int) -> ServerHost:
        """The aggregator of ``target``'s group.

        A fresh :class:`ServerHost` each round, except for algorithms with
        ``personalized_downloads`` (FedAMP, APPLE): their server keeps every
        upload between rounds, so each target keeps one for the whole run.
        """
        if not self.algorithm.personalized_downloads:
            return ServerHost(self.setup)
        servers: dict[int, ServerHost] = self.__dict__.setdefault("_servers", {})
        if target not in servers:
            servers[target] = ServerHost(self.setup)
        return servers[target]

    def get_state(self) -> dict[str, Any]:
        """Return the hosted clients' state and the group servers' stores.

        ``{"clients": {client: {name: value}}, "servers": {target: store}}``
        (servers only for algorithms with ``personalized_downloads``): what a
        checkpoint holds and what a restarted actor gets back.
        """
        servers: dict[int, ServerHost] = self.__dict__.get("_servers", {})
        return {
            "clients": super().get_state(),
            "servers": {t: s.get_state() for t, s in servers.items()},
        }

    def reset(self, setup: ActorSetup) -> None:
        """Start a new run on the same data: new setup (seed), no models, no servers."""
        super().reset(setup)
        self.__dict__["_servers"] = {}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`get_state` (clients and servers not hosted here ignored)."""
        super().set_state(state.get("clients", {}))
        servers: dict[int, ServerHost] = {}
        for t, store in state.get("servers", {}).items():
            if int(t) in self.clients:
                servers[int(t)] = ServerHost(self.setup)
                servers[int(t)].set_state(store)
        self.__dict__["_servers"] = servers

    @needs_state
    def group_download_refs(
        self,
        round: int,
        target: int,
        global_vector: Vector,
        clients: list[int],
        num_clients: int,
    ) -> dict[int, Any]:
        """Per-client downloads of ``target``'s group server, as object refs.

        Only for algorithms with ``personalized_downloads``: what
        :meth:`ServerHost.download_refs` returns (client → ref) for the group.
        """
        refs, _ = self._group_server(target).download_refs(
            round, global_vector, clients, num_clients
        )
        return refs

    @needs_state
    def aggregate_group(
        self,
        round: int,
        target: int,
        global_vector: Vector,
        link: LinkOutcome | None,
        *uploads: Uploads,
    ) -> tuple[Vector, dict[str, Any]]:
        """Aggregate a federated baseline's uploads at the target and evaluate.

        The target plays the server of the algorithm (``ServerHost.aggregate``:
        channel losses, rejection, the algorithm's aggregation, in that order).

        Returns:
            The group's new global model and the target's record:
            ``post_agg_acc``/``post_agg_loss`` of the model the algorithm evaluates
            for the target (its personal model if it keeps one, else the global
            one), the delivered clients and ``rejected`` (client → reason).
        """
        server = self._group_server(target)
        new, report = server.aggregate(round, global_vector, link, *uploads)
        # The star client's evaluation, so an algorithm that adapts ω on the
        # client's train data before testing (Per-FedAvg) does so here too.
        (row,) = self.evaluate(new, [target])
        acc = row.get("personal_acc", row["test_acc"])
        loss = row.get("personal_loss", row["test_loss"])
        return new, {
            "client": target,
            "post_agg_acc": acc,
            "post_agg_loss": loss,
            "delivered": report["delivered"],
            "rejected": report["reasons"],
        }


def _lookup(
    clients: list[int],
    sources: list[int],
    model_dicts: tuple[dict[int, Vector], ...],
) -> npt.NDArray[np.float32]:
    """Stack ``model_dicts[sources[i]][clients[i]]`` (rows in ``clients`` order)."""
    if not clients:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack(
        [model_dicts[s][int(c)] for c, s in zip(clients, sources, strict=True)]
    )


D2DClientActor = ray.remote(D2DClientHost)
"""``D2DClientHost`` as a Ray actor class (``@ray.remote`` once, at module level)."""
