"""CIFAR-10 "python version" batches (Krizhevsky 2009), read with numpy only.

Layout (https://www.cs.toronto.edu/~kriz/cifar.html, and torchvision's
``root/cifar-10-batches-py/``): ``data_batch_1`` … ``data_batch_5`` (train) and
``test_batch``, each a pickled dict with ``b"data"``: ``(10000, 3072) uint8``, rows
holding the 1024 red, then 1024 green, then 1024 blue pixels of a 32×32 image in
row-major order, and ``b"labels"``: a list of 10000 ints in 0..9.

Unpickling is restricted to the numpy globals these files need, so a tampered file
cannot run code. Functions here raise ``ValueError`` naming the file;
``rayfl.data.datasets`` turns them into ``DatasetError``.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

TRAIN_BATCHES: tuple[str, ...] = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
BATCHES_DIR = "cifar-10-batches-py"
IMAGE_SHAPE = (3, 32, 32)

_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that only resolves the numpy globals of a CIFAR batch."""

    def find_class(self, module: str, name: str) -> Any:
        """Resolve ``module.name`` if allowed, else refuse."""
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        return super().find_class(module, name)


def find_cifar_dir(candidates: Sequence[Path]) -> Path | None:
    """Return the first directory holding all six CIFAR-10 python batches.

    Args:
        candidates: Directories to search, in order.

    Returns:
        The directory, or None if no candidate has every batch file.
    """
    for directory in candidates:
        names = (*TRAIN_BATCHES, TEST_BATCH)
        if all((directory / name).is_file() for name in names):
            return directory
    return None


def read_cifar_batch(
    path: Path,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Read one pickled CIFAR-10 batch.

    Args:
        path: A ``data_batch_k`` or ``test_batch`` file.

    Returns:
        ``images (n, 3, 32, 32) uint8`` and ``labels (n,) int64``.

    Raises:
        ValueError: Not a valid batch (unpickling fails, keys missing, wrong shape
            or dtype, labels outside 0..9); names the file.
    """
    try:
        with path.open("rb") as file:
            batch = _NumpyOnlyUnpickler(file, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as error:
        raise ValueError(f"{path}: not a CIFAR-10 python batch ({error})") from error
    if not isinstance(batch, dict):
        raise ValueError(f"{path}: expected a pickled dict, got {type(batch).__name__}")
    batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
    if "data" not in batch or "labels" not in batch:
        raise ValueError(
            f"{path}: missing b'data' or b'labels' (keys: {sorted(batch)})"
        )
    data = np.asarray(batch["data"])
    labels = np.asarray(batch["labels"], dtype=np.int64)
    pixels = int(np.prod(IMAGE_SHAPE))
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != pixels:
        raise ValueError(
            f"{path}: b'data' must be (n, {pixels}) uint8, got {data.shape} "
            f"{data.dtype}"
        )
    if labels.shape != (data.shape[0],):
        raise ValueError(
            f"{path}: {data.shape[0]} images but labels of shape {labels.shape}"
        )
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise ValueError(f"{path}: labels outside 0..9")
    return data.reshape(-1, *IMAGE_SHAPE), labels


def read_cifar10(
    directory: Path,
) -> tuple[
    npt.NDArray[np.uint8],
    npt.NDArray[np.int64],
    npt.NDArray[np.uint8],
    npt.NDArray[np.int64],
]:
    """Read the five train batches and the test batch of CIFAR-10.

    Args:
        directory: A directory accepted by ``find_cifar_dir``.

    Returns:
        ``train_images (n, 3, 32, 32) uint8``, ``train_labels (n,) int64``,
        ``test_images``, ``test_labels`` (50000/10000 images for the real data).

    Raises:
        ValueError: A batch is malformed (see ``read_cifar_batch``).
    """
    train = [read_cifar_batch(directory / name) for name in TRAIN_BATCHES]
    test_images, test_labels = read_cifar_batch(directory / TEST_BATCH)
    train_images = np.concatenate([images for images, _ in train])
    train_labels = np.concatenate([labels for _, labels in train])
    return train_images, train_labels, test_images, test_labels
