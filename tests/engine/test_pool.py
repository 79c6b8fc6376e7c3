"""ActorPool: packing, routing, and a dead actor's results as lost updates."""

from __future__ import annotations

import numpy as np
import pytest
import ray

from rayfl.actors.pool import (
    ActorPool,
    _as_range,
    pack_clients,
    resolve_clients_per_actor,
)
from rayfl.config import RayConfig
from rayfl.data.config import DataConfig
from rayfl.data.federated import build_federated

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")


def test_pack_clients_is_contiguous_and_covers_every_client_once():
    for n, m in [(1, 1), (7, 3), (8, 4), (5, 9)]:
        groups = pack_clients(n, m)
        assert sum(groups, []) == list(range(n))
        assert all(0 < len(g) <= m for g in groups)
        assert len(groups) == -(-n // m)


def test_by_actor_groups_clients_by_host_keeping_their_order():
    groups = pack_clients(5, 2)
    actor_of = np.array([0, 0, 1, 1, 2])
    pool = ActorPool([], groups, actor_of)
    assert pool.by_actor([4, 3, 0, 2]) == {0: [0], 1: [3, 2], 2: [4]}
    assert pool.by_actor([]) == {}


class _Restarting:
    """An actor handle whose ``set_state`` answers "unavailable" ``fails`` times."""

    def __init__(self, fails: int) -> None:
        self.fails, self.calls = fails, []
        self.set_state = self

    def options(self, **_: object) -> _Restarting:
        return self

    def remote(self, state: object) -> object:
        self.calls.append(state)
        return self


def _get_with(monkeypatch, actor: _Restarting) -> None:
    def get(refs):
        if actor.fails:
            actor.fails -= 1
            raise ray.exceptions.ActorUnavailableError("restarting", None)
        return [None] * len(refs)

    monkeypatch.setattr(ray, "get", get)


def test_restore_failed_sends_the_state_again_while_the_actor_restarts(monkeypatch):
    actor = _Restarting(fails=2)
    pool = ActorPool([actor], [[0]], np.array([0]))
    pool.to_restore, pool.state_refs = {0}, {0: {"x": 1}}
    _get_with(monkeypatch, actor)
    pool.restore_failed(wait_s=0.0)
    assert actor.calls == [{"x": 1}] * 3 and pool.to_restore == set()


def test_restore_failed_gives_up_after_its_tries(monkeypatch):
    actor = _Restarting(fails=5)
    pool = ActorPool([actor], [[0]], np.array([0]))
    pool.to_restore = {0}
    _get_with(monkeypatch, actor)
    with pytest.raises(ray.exceptions.ActorUnavailableError):
        pool.restore_failed(tries=3, wait_s=0.0)
    assert len(actor.calls) == 3 and pool.to_restore == {0}


def test_only_contiguous_groups_become_ranges():
    assert _as_range(list(range(3, 50_003))) == range(3, 50_003)
    assert _as_range([0, 2, 3]) == [0, 2, 3]
    assert _as_range([]) == []


def test_explicit_clients_per_actor_is_taken_as_is():
    assert resolve_clients_per_actor(3, 10, cpus=2.0) == 3


@ray.remote
class _Host:
    def __init__(self, shared, group, tag):
        self.group, self.tag = group, tag

    def ping(self):
        return ray.get_runtime_context().get_node_id()

    def work(self, die):
        if die:
            ray.actor.exit_actor()
        return (self.tag, self.group)


def test_start_names_actors_and_gather_turns_a_dead_actor_into_none(ray_session):
    data = build_federated(DataConfig(dataset="digits", num_clients=5), seed=0)
    pool = ActorPool.start(
        _Host,
        data,
        "x",
        ray_settings=RayConfig(clients_per_actor=2, max_actor_restarts=0),
        dim=10,
        role="hosts",
    )
    try:
        assert pool.groups == [[0, 1], [2, 3], [4]]
        assert pool.actor_of.tolist() == [0, 0, 1, 1, 2]
        names = set(ray.util.list_named_actors())
        assert {f"rayfl-{pool.run_id}-hosts-{a}" for a in range(3)} <= names
        assert len(pool.placement()) == 3 and pool.placement()[2]["clients"] == [4, 4]
        refs = [a.work.remote(a_id == 1) for a_id, a in enumerate(pool.actors)]
        out = pool.gather(refs, [0, 1, 2])
        # contiguous groups reach the hosts as ranges (tiny constructor arguments)
        assert out == [("x", range(0, 2)), None, ("x", range(4, 5))]
        assert pool.to_restore == {1}
    finally:
        pool.close()
    assert pool.actors == [] and pool.reservation is None


@ray.remote
def _pack_inside(num_clients: int, run_cpus: float | None) -> tuple[float, int]:
    """What a run started inside this Ray task would reserve, and its packing."""
    from rayfl.cluster.resources import ResourceError
    from rayfl.cluster.resources import run_cpus as cpus_of

    try:
        cpus = cpus_of(run_cpus)
    except ResourceError as error:
        return -1.0, len(str(error).splitlines())
    return cpus, resolve_clients_per_actor("auto", num_clients, cpus)


def test_a_run_inside_a_ray_worker_leaves_out_the_cpus_its_host_holds(ray_session):
    # Oracle: the 2-CPU session less what the task holds. Before, a run started
    # inside an RLlib EnvRunner (1 CPU) waited for both CPUs until it timed out.
    assert ray.get(_pack_inside.options(num_cpus=1).remote(6, None)) == (1.0, 6)
    assert ray.get(_pack_inside.options(num_cpus=0.5).remote(6, None)) == (1.5, 4)
    assert ray.get(_pack_inside.options(num_cpus=0.5).remote(6, 0.25)) == (0.25, 6)
    # a host holding every CPU: a one-line error at once, not a wait
    assert ray.get(_pack_inside.options(num_cpus=2).remote(6, None)) == (-1.0, 1)
