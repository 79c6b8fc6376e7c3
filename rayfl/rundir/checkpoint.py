"""Checkpoints of a run: everything needed to continue it after the driver dies.

A checkpoint is plain data, never pickle, so resuming a run directory cannot
run code from it:

- ``<run_dir>/checkpoint/state.json``: the state tree (global model, every
  client's state, the privacy ledger, the scheduler's or policy's state, the
  log rows so far) as JSON, with every numpy array or scalar replaced by a
  reference into
- ``<run_dir>/checkpoint/arrays-<round>.npz``: the arrays, read with
  ``np.load(..., allow_pickle=False)`` (object arrays are refused);
- ``<run_dir>/checkpoint/round.json``: the next round, for a quick look.

Random draws need no saved state: each is keyed by (seed, purpose, round,
client) (``rayfl.seeding``), so a resumed run draws exactly what the
uninterrupted run would have.

Implementation details:
    1. JSON keeps Python floats exactly (shortest repr, ``NaN``/``Infinity``
       included) and integers of any size. Tuples, dicts with non-string keys,
       numpy generators (their bit-generator state) and dataclasses of rayfl's
       own modules are tagged (``{"~tuple": [...]}``...), so the loaded tree has
       the saved types and a resumed run stays bit-identical.
    2. Any other object is refused when saving (``TypeError`` naming its path
       in the tree); :func:`plain_attributes` keeps the plain-data attributes of
       an object whose other attributes are rebuilt from the config (a policy).
    3. The npz is written first under a new name, then ``state.json`` (which
       names it) replaces the old one: a crash in between leaves the previous
       checkpoint intact.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from rayfl.rundir.results import atomic_write

__all__ = [
    "CheckpointFormatError",
    "decode_tree",
    "encode_tree",
    "load_checkpoint",
    "plain_attributes",
    "restore_attributes",
    "save_checkpoint",
]

_FORMAT = 2
_DATACLASS_MODULES = ("rayfl.",)  # the engine never names an upper layer


class CheckpointFormatError(ValueError):
    """A checkpoint that this version of rayfl does not load (old or foreign)."""


def save_checkpoint(run_dir: Path, state: dict[str, Any]) -> None:
    """Write ``state`` (which must hold ``next_round``) atomically as JSON + npz.

    Raises:
        TypeError: If the state holds an object that is not plain data.
    """
    folder = Path(run_dir) / "checkpoint"
    arrays: dict[str, np.ndarray] = {}
    tree = encode_tree(state, arrays)
    npz = f"arrays-{int(state['next_round'])}.npz"

    def write_npz(path: Path) -> None:
        with open(path, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy stubs: **kwds vs allow_pickle

    atomic_write(folder / npz, write_npz)
    text = json.dumps({"format": _FORMAT, "arrays": npz, "state": tree})
    atomic_write(folder / "state.json", lambda p: p.write_text(text))
    meta = json.dumps({"next_round": state["next_round"]})
    atomic_write(folder / "round.json", lambda p: p.write_text(meta))
    for old in folder.glob("arrays-*.npz"):
        if old.name != npz:
            old.unlink(missing_ok=True)


def load_checkpoint(run_dir: str | Path) -> dict[str, Any]:
    """Return the checkpoint of ``run_dir`` (JSON and npz only; nothing unpickled).

    Raises:
        FileNotFoundError: If the run has no checkpoint (set
            ``output.checkpoint_every`` to make them).
        CheckpointFormatError: If the checkpoint is of another format (e.g. a
            pickled ``state.pkl`` of an older rayfl, which is never loaded).
    """
    folder = Path(run_dir) / "checkpoint"
    path = folder / "state.json"
    if not path.is_file():
        if (folder / "state.pkl").exists():
            raise CheckpointFormatError(
                f"{folder / 'state.pkl'} is a pickled checkpoint of an older rayfl; "
                "it is not loaded, since unpickling a file can run code. Rerun the "
                "config (rayfl run) to get a resumable run directory."
            )
        raise FileNotFoundError(
            f"{run_dir} has no checkpoint: run with output.checkpoint_every=N to "
            "checkpoint every N rounds"
        )
    doc = json.loads(path.read_text())
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else None
        raise CheckpointFormatError(
            f"{path}: checkpoint format {got!r} not supported (this rayfl reads "
            f"format {_FORMAT})"
        )
    name = str(doc["arrays"])
    if Path(name).name != name:
        raise CheckpointFormatError(f"{path}: bad arrays file name {name!r}")
    with np.load(folder / name, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return decode_tree(doc["state"], arrays)


def encode_tree(obj: Any, arrays: dict[str, np.ndarray], path: str = "state") -> Any:
    """Return ``obj`` as a JSON-able tree; numpy arrays and scalars go to ``arrays``.

    Raises:
        TypeError: If ``obj`` holds something that is not plain data.

    Example:
        >>> arrays = {}
        >>> encode_tree({"w": np.zeros(2, np.float32), 3: (1, "a")}, arrays)
        {'~dict': [['w', {'~array': 'a0'}], [3, {'~tuple': [1, 'a']}]]}
    """
    if isinstance(obj, (np.ndarray, np.generic)):  # before float: np.float64 is one
        arr = np.asarray(obj)
        if arr.dtype.hasobject:
            raise TypeError(f"{path}: object arrays cannot be checkpointed")
        key = f"a{len(arrays)}"
        arrays[key] = arr
        return {"~array": key} if isinstance(obj, np.ndarray) else {"~scalar": key}
    if obj is None or isinstance(obj, (bool, str, int, float)):
        return obj
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return {
            "~tuple": [
                encode_tree(v, arrays, f"{path}[{i}]") for i, v in enumerate(obj)
            ]
        }
    if isinstance(obj, list):
        return [encode_tree(v, arrays, f"{path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        items = [
            (
                encode_tree(k, arrays, f"{path}.<key>"),
                encode_tree(v, arrays, f"{path}.{k}"),
            )
            for k, v in obj.items()
        ]
        if all(isinstance(k, str) and not k.startswith("~") for k in obj):
            return dict(items)
        return {"~dict": [[k, v] for k, v in items]}
    if isinstance(obj, np.random.Generator):
        bits = obj.bit_generator
        return {
            "~rng": type(bits).__name__,
            "state": encode_tree(bits.state, arrays, f"{path}.state"),
        }
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        if cls.__module__.startswith(_DATACLASS_MODULES):
            fields = {
                f.name: encode_tree(getattr(obj, f.name), arrays, f"{path}.{f.name}")
                for f in dataclasses.fields(obj)
            }
            return {
                "~dataclass": f"{cls.__module__}:{cls.__qualname__}",
                "fields": fields,
            }
    raise TypeError(
        f"{path}: a {type(obj).__module__}.{type(obj).__qualname__} cannot be "
        "checkpointed (only numbers, strings, lists, tuples, dicts, numpy arrays "
        "and generators, and rayfl dataclasses)"
    )


def decode_tree(tree: Any, arrays: dict[str, np.ndarray]) -> Any:
    """Invert :func:`encode_tree` (dataclasses only from rayfl's own modules)."""
    if isinstance(tree, list):
        return [decode_tree(v, arrays) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if "~array" in tree:
        return np.array(arrays[tree["~array"]])
    if "~scalar" in tree:
        return arrays[tree["~scalar"]][()]
    if "~tuple" in tree:
        return tuple(decode_tree(v, arrays) for v in tree["~tuple"])
    if "~dict" in tree:
        return {
            decode_tree(k, arrays): decode_tree(v, arrays) for k, v in tree["~dict"]
        }
    if "~rng" in tree:
        name = tree["~rng"]
        if name not in ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937"):
            raise CheckpointFormatError(f"unknown bit generator {name!r}")
        bits = getattr(np.random, name)()
        bits.state = decode_tree(tree["state"], arrays)
        return np.random.Generator(bits)
    if "~dataclass" in tree:
        return _make_dataclass(tree["~dataclass"], decode_tree(tree["fields"], arrays))
    return {k: decode_tree(v, arrays) for k, v in tree.items()}


def _make_dataclass(name: str, fields: dict[str, Any]) -> Any:
    """Rebuild a dataclass of rayfl's own modules without running its __init__."""
    module, _, qualname = name.partition(":")
    if not module.startswith(_DATACLASS_MODULES):
        raise CheckpointFormatError(f"checkpoint names a foreign class {name!r}")
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise CheckpointFormatError(f"checkpoint names {name!r}, not a dataclass")
    known = {f.name for f in dataclasses.fields(cls)}
    if set(fields) - known:
        raise CheckpointFormatError(
            f"{name}: unknown fields {sorted(set(fields) - known)}"
        )
    obj = object.__new__(cls)
    for key, value in fields.items():
        object.__setattr__(obj, key, value)
    return obj


def plain_attributes(obj: Any) -> dict[str, Any]:
    """Return the attributes of ``obj`` that :func:`encode_tree` accepts.

    For objects rebuilt from the config on resume (a scheduling policy): their
    evolving plain-data state (queues, averages, generators) is kept, their
    wiring (spaces, bound systems, networks, and dataclasses of the layers
    above the engine, such as a policy's constant bound or its current
    round's solution) is rebuilt.
    """
    out = {}
    for key, value in vars(obj).items():
        try:
            encode_tree(value, {})
        except TypeError:
            continue
        out[key] = value
    return out


def restore_attributes(obj: Any, attributes: dict[str, Any]) -> None:
    """Set the attributes saved by :func:`plain_attributes` on a rebuilt ``obj``."""
    for key, value in attributes.items():
        setattr(obj, key, value)
