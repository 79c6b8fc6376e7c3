import pytest

from rayfl.cluster.resources import (
    ACTOR_BASE_BYTES,
    ResourceError,
    check_fits,
    estimate_memory,
)


def test_estimate_hand_values():
    e = estimate_memory(num_clients=10, clients_per_actor=5, dim=250, data_bytes=1000)
    assert e.per_actor == ACTOR_BASE_BYTES + 4 * 1000 + 5 * 1000
    assert e.actors == 2 * e.per_actor
    assert e.object_store == 1000 + 1000 + 10 * 1000


def test_refuses_one_actor_per_client_and_suggests_packing():
    e = estimate_memory(
        num_clients=10_000, clients_per_actor=1, dim=7850, data_bytes=10**8
    )
    with pytest.raises(ResourceError, match=r"ray.clients_per_actor=\d+") as info:
        check_fits(
            e,
            memory_bytes=16 * 2**30,
            object_store_bytes=8 * 2**30,
            num_clients=10_000,
            clients_per_actor=1,
        )
    suggested = int(str(info.value).rsplit("=", 1)[1])
    packed = estimate_memory(
        num_clients=10_000, clients_per_actor=suggested, dim=7850, data_bytes=10**8
    )
    check_fits(
        packed,
        memory_bytes=16 * 2**30,
        object_store_bytes=8 * 2**30,
        num_clients=10_000,
        clients_per_actor=suggested,
    )


def test_refuses_object_store_overflow():
    e = estimate_memory(
        num_clients=10, clients_per_actor=5, dim=10, data_bytes=3 * 2**30
    )
    with pytest.raises(ResourceError, match="object store"):
        check_fits(
            e,
            memory_bytes=2**40,
            object_store_bytes=2**30,
            num_clients=10,
            clients_per_actor=5,
        )
