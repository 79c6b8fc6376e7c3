"""The vector env's columnar steps (envs.star.columns) equal its lane path.

The oracle is the lane path of the same vector env (``columns=False``: one
:class:`rayfl.star.lanes.StarLanes` lane env after another), itself tested equal
to the single ``WirelessFL-v0`` env lane by lane (tests/envs/test_vector.py).
Both run the same seeds and actions, across autoresets; every observation key,
reward, episode end and info must agree: bit for bit, except what the
evaluation after a round measures (``test_loss``, ``test_acc`` and the rewards
read from them), equal to float32 rounding because the columns evaluate the
test splits alone (a forward pass over other rows: another BLAS blocking).
"""

import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.star.scheduling import DEFAULT_CONFIG
from envs.star.vector import WirelessFLVectorEnv
from rayfl.star.columns import columns_refusal

pytestmark = pytest.mark.usefixtures("ray_session")

#: What the evaluation after a round measures (float32 rounding apart).
MEASURED = {"test_loss", "test_acc"}

SMALL = {**DEFAULT_CONFIG, "rounds": 3}
#: Packet loss, a T0 cap that ends episodes early (termination), ignored clients.
CAPPED = {
    **DEFAULT_CONFIG,
    "rounds": 6,
    "data": {**DEFAULT_CONFIG["data"], "num_clients": 6},
    "wireless": {"num_subchannels": 3, "effects": "packet_loss"},
    "privacy": {"max_uploads": 2},
}


def _trace(config, columns, reward, steps, lanes=3):
    venv = WirelessFLVectorEnv(lanes, config=config, columns=columns, reward=reward)
    try:
        assert venv.columnar == bool(columns)
        trace = [venv.reset(seed=7)]
        space = venv.action_space
        space.seed(1)
        for _ in range(steps):
            trace.append(venv.step(space.sample()))
        # what a policy reads of a lane's model: the ledger and its eligibility
        ledgers = [env.backend.uplink.upload_count() for env in venv.envs]
        trace.append((ledgers, [env.action_masks() for env in venv.envs]))
    finally:
        venv.close()
    return trace


def _same(a, b, path, measured=False):
    if isinstance(a, tuple | list) and not (a and isinstance(a[0], int | float)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]", measured)
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for key in a:
            _same(a[key], b[key], f"{path}.{key}", measured or key in MEASURED)
    elif isinstance(a, np.ndarray) and a.dtype == object:
        _same(list(a), list(b), path, measured)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        if measured:
            np.testing.assert_allclose(a, b, rtol=1e-6, err_msg=path)
        else:
            np.testing.assert_array_equal(a, b, err_msg=path)
    else:
        assert a == b, (path, a, b)


@pytest.mark.parametrize(
    "config,reward,steps",
    [(SMALL, "min_max_loss", 9), (CAPPED, "loss_decrease", 8)],
    ids=["small", "capped"],
)
def test_columns_equal_the_lanes(config, reward, steps):
    lanes = _trace(config, False, reward, steps)
    columns = _trace(config, True, reward, steps)
    _same(lanes.pop(), columns.pop(), "ledgers and action masks")
    for t, (a, b) in enumerate(zip(lanes, columns, strict=True)):
        if t == 0:
            _same(a, b, "reset")
            continue
        obs, rew, term, trunc, info = b
        _same(a[0], obs, f"step {t} obs")
        np.testing.assert_allclose(a[1], rew, rtol=1e-6, err_msg=f"step {t} reward")
        _same(a[2], term, f"step {t} terminated")
        _same(a[3], trunc, f"step {t} truncated")
        _same(a[4], info, f"step {t} info")
    ends = np.array([t[2] | t[3] for t in columns[1:]])
    assert ends.any(axis=0).all(), "every lane should end an episode (autoreset)"
    if config is CAPPED:
        assert any(t[2].any() for t in columns[1:]), "the T0 cap should terminate"
        assert any(
            any(len(x) for x in t[4]["ignored"])
            for t in columns[1:]
            if "ignored" in t[4]
        ), "ineligible or repeated clients should be ignored"


def test_columns_refuse_what_they_do_not_model():
    private = {
        **SMALL,
        "privacy": {"mechanism": "gaussian", "epsilon": 5.0, "clip_norm": 1.0},
    }
    from rayfl.config import load_config

    assert columns_refusal(load_config(SMALL)) is None
    assert "privacy" in columns_refusal(load_config(private))
    compressed = load_config(
        {**SMALL, "compression": {"quantize_bits": 8, "quantize_range": "minmax"}}
    )
    assert "compression" in columns_refusal(compressed)
    venv = WirelessFLVectorEnv(2, config=private)
    try:
        assert not venv.columnar  # the lane path runs it
    finally:
        venv.close()
    with pytest.raises(ValueError, match="columns=True but columns need privacy"):
        WirelessFLVectorEnv(2, config=private, columns=True)
    with pytest.raises(ValueError, match="columns=True but columns run the emulation"):
        WirelessFLVectorEnv(2, config=SMALL, mode="surrogate", columns=True)
