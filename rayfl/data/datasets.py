"""Real image datasets from local files (never downloaded), as numpy arrays.

Every loader returns ``(train, test)`` ``ArrayDataset`` pairs with channels-first
images ``x (n, C, H, W) float32`` scaled to [0, 1] and then normalized as
``(x − 0.5) / 0.5`` (so x ∈ [−1, 1]; mean 0.5 / std 0.5 per channel, as the specs and
PFLlib use), and labels ``y (n,) int64``.

Sources (DESIGN.md "No dataset downloads"):

- ``fashion_mnist``: Debian's ``dataset-fashion-mnist`` package
  (``/usr/share/datasets/fashion-mnist/*.gz``) when no root is given, or a user
  root in torchvision layout (``root/FashionMNIST/raw/``) or with the four IDX
  files directly in ``root`` (a root without them is an error, not the system copy).
- ``mnist``: IDX files under ``root/MNIST/raw/`` (torchvision layout) or ``root``.
- ``cifar10``: python batches under ``root/cifar-10-batches-py/`` (or ``root``).
- ``digits``: the 8×8 digits shipped inside scikit-learn (1797 images, 0..16 → /16).
  It has no official split: we make a stratified 80/20 split with the fixed seed
  ``DIGITS_SPLIT_SEED``: per class, ``round(0.2 · n_class)`` test samples.

Loaded arrays are cached per process (``functools.lru_cache`` on ``(name, root)``)
and marked read-only: never write into them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rayfl.data.cifar import BATCHES_DIR, find_cifar_dir, read_cifar10
from rayfl.data.idx import find_idx_dir, read_idx_split

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
DIGITS_SPLIT_SEED = 20_240_817
DIGITS_TEST_FRACTION = 0.2
DATASET_NAMES = ("fashion_mnist", "mnist", "cifar10", "digits")

_IDX_LIST = (
    "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
    "t10k-labels-idx1-ubyte (each raw or .gz)"
)


class DatasetError(ValueError):
    """A dataset is missing, corrupt or inconsistent; the message says how to fix it."""


@dataclass(frozen=True, eq=False)
class ArrayDataset:
    """A labelled dataset held as two numpy arrays.

    Attributes:
        x: Inputs, ``(n, *input_shape) float32``; images are ``(n, C, H, W)``,
            normalized to [−1, 1].
        y: Labels, ``(n,) int64`` in ``0 .. num_classes − 1``.
        num_classes: Number of classes.
        name: Dataset name, e.g. "fashion_mnist/train".
    """

    x: npt.NDArray[np.float32]
    y: npt.NDArray[np.int64]
    num_classes: int
    name: str

    def __post_init__(self) -> None:
        """Check dtypes, shapes and label range."""
        if self.x.dtype != np.float32 or self.y.dtype != np.int64:
            raise DatasetError(
                f"{self.name}: x must be float32 and y int64, got {self.x.dtype} "
                f"and {self.y.dtype}"
            )
        if self.x.ndim < 2 or self.y.shape != (self.x.shape[0],):
            raise DatasetError(
                f"{self.name}: x {self.x.shape} and y {self.y.shape} must be "
                "(n, ...) and (n,)"
            )
        if self.y.size and (self.y.min() < 0 or self.y.max() >= self.num_classes):
            raise DatasetError(f"{self.name}: labels outside 0..{self.num_classes - 1}")

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one input, e.g. ``(1, 28, 28)``."""
        return tuple(int(d) for d in self.x.shape[1:])


def _normalize(pixels: npt.NDArray[np.generic], max_value: float) -> np.ndarray:
    """Scale to [0, 1] by ``max_value`` then map to [−1, 1] by (x − 0.5) / 0.5."""
    x = pixels.astype(np.float32) / np.float32(max_value)
    return (x - np.float32(0.5)) / np.float32(0.5)


def _frozen(name: str, x: np.ndarray, y: np.ndarray, num_classes: int) -> ArrayDataset:
    x = np.ascontiguousarray(x, dtype=np.float32)
    y = np.ascontiguousarray(y, dtype=np.int64)
    x.flags.writeable = False
    y.flags.writeable = False
    return ArrayDataset(x=x, y=y, num_classes=num_classes, name=name)


def _idx_candidates(name: str, root: str | None) -> list[Path]:
    subdir = {"fashion_mnist": "FashionMNIST", "mnist": "MNIST"}[name]
    found = [] if root is None else [Path(root) / subdir / "raw", Path(root)]
    # a given root is the only place looked at: never the system copy instead
    return [FASHION_MNIST_DIR] if name == "fashion_mnist" and root is None else found


def _cifar_candidates(root: str | None) -> list[Path]:
    return [] if root is None else [Path(root) / BATCHES_DIR, Path(root)]


def _missing_message(name: str, root: str | None) -> str:
    """How to get ``name``: the text used in errors and ``available_datasets``."""
    where = f"in {root}" if root is not None else "(no data.root given)"
    if name == "fashion_mnist":
        where = f"in {root}" if root else f"in {FASHION_MNIST_DIR}"
        return (
            f"Fashion-MNIST not found {where}: install it with `apt-get install "
            f"dataset-fashion-mnist` (files go to {FASHION_MNIST_DIR}) or pass "
            f"data.root=DIR containing FashionMNIST/raw/*.gz (torchvision layout: "
            f"{_IDX_LIST}); this machine cannot download"
        )
    if name == "mnist":
        return (
            f"MNIST not found {where}: pass data.root=DIR containing MNIST/raw/ "
            f"with {_IDX_LIST} (torchvision layout), or those four files directly "
            "in DIR; this machine cannot download"
        )
    return (
        f"CIFAR-10 not found {where}: it must be provided as the python version "
        f"batches (data_batch_1..5, test_batch) under data.root/{BATCHES_DIR} "
        "(torchvision layout), since this machine cannot download"
    )


def _load_idx(name: str, root: str | None) -> tuple[ArrayDataset, ArrayDataset]:
    directory = find_idx_dir(_idx_candidates(name, root))
    if directory is None:
        raise DatasetError(_missing_message(name, root))
    try:
        splits = [read_idx_split(directory, split) for split in ("train", "test")]
    except (ValueError, OSError) as error:
        raise DatasetError(f"{name}: {error}") from error
    train, test = (
        _frozen(f"{name}/{split}", _normalize(images[:, None], 255.0), labels, 10)
        for split, (images, labels) in zip(("train", "test"), splits, strict=True)
    )
    return train, test


def fashion_mnist(root: str | None = None) -> tuple[ArrayDataset, ArrayDataset]:
    """Load Fashion-MNIST (Xiao et al. 2017): 60000/10000 images (1, 28, 28).

    Args:
        root: Optional directory (torchvision layout or the IDX files directly);
            None reads ``/usr/share/datasets/fashion-mnist``. A given root is
            the only place looked at (never the system copy instead).

    Returns:
        ``(train, test)``.

    Raises:
        DatasetError: Not found (with the install hint) or a corrupt file.
    """
    return _load_idx("fashion_mnist", root)


def mnist(root: str | None = None) -> tuple[ArrayDataset, ArrayDataset]:
    """Load MNIST (LeCun et al. 1998): 60000/10000 images (1, 28, 28).

    Args:
        root: Directory with ``MNIST/raw/*-ubyte[.gz]`` or the files directly.

    Returns:
        ``(train, test)``.

    Raises:
        DatasetError: Not found (with how to provide it) or a corrupt file.
    """
    return _load_idx("mnist", root)


def cifar10(root: str | None = None) -> tuple[ArrayDataset, ArrayDataset]:
    """Load CIFAR-10 (Krizhevsky 2009): 50000/10000 images (3, 32, 32).

    Args:
        root: Directory with ``cifar-10-batches-py/`` (or the batches directly).

    Returns:
        ``(train, test)``, normalized per channel with mean 0.5 and std 0.5.

    Raises:
        DatasetError: Not found (with how to provide it) or a corrupt batch.
    """
    directory = find_cifar_dir(_cifar_candidates(root))
    if directory is None:
        raise DatasetError(_missing_message("cifar10", root))
    try:
        train_x, train_y, test_x, test_y = read_cifar10(directory)
    except (ValueError, OSError) as error:
        raise DatasetError(f"cifar10: {error}") from error
    return (
        _frozen("cifar10/train", _normalize(train_x, 255.0), train_y, 10),
        _frozen("cifar10/test", _normalize(test_x, 255.0), test_y, 10),
    )


def digits(root: str | None = None) -> tuple[ArrayDataset, ArrayDataset]:
    """Load scikit-learn's 8×8 digits (UCI optdigits test set): 1797 images (1, 8, 8).

    Args:
        root: Ignored (the data ships inside scikit-learn).

    Returns:
        ``(train, test)`` from a stratified 80/20 split drawn with the fixed seed
        ``DIGITS_SPLIT_SEED`` (1438/359 samples).
    """
    images, target = _sklearn_digits()
    labels = np.asarray(target, dtype=np.int64)
    rng = np.random.default_rng(DIGITS_SPLIT_SEED)
    test_parts = []
    for label in range(10):
        members = rng.permutation(np.flatnonzero(labels == label))
        test_parts.append(members[: round(DIGITS_TEST_FRACTION * members.size)])
    is_test = np.zeros(labels.size, dtype=bool)
    is_test[np.concatenate(test_parts)] = True
    x = _normalize(np.asarray(images)[:, None], 16.0)
    return (
        _frozen("digits/train", x[~is_test], labels[~is_test], 10),
        _frozen("digits/test", x[is_test], labels[is_test], 10),
    )


def _sklearn_digits() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Return ``load_digits()``'s ``(images, target)``, read without importing sklearn.

    ``import sklearn`` (it imports scipy.stats) was nearly all of a digits run's
    data set-up (0.8 s of CPU on the driver); the file is read as
    ``sklearn.datasets.load_digits`` reads it (``np.loadtxt`` of the gzipped
    CSV shipped in the wheel), so the arrays are the same. Falls back to
    ``load_digits`` when the file is not where that layout puts it.
    """
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    roots = [] if spec is None else list(spec.submodule_search_locations or [])
    for root in roots:
        path = Path(root) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            with gzip.open(path, mode="rt", encoding="utf-8") as text:
                data = np.loadtxt(text, delimiter=",")
            return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int, copy=False)
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return np.asarray(bunch.images), np.asarray(bunch.target)


_LOADERS: dict[str, Callable[[str | None], tuple[ArrayDataset, ArrayDataset]]] = {
    "fashion_mnist": fashion_mnist,
    "mnist": mnist,
    "cifar10": cifar10,
    "digits": digits,
}


def _canonical_root(root: str | Path | None) -> str | None:
    return None if root is None else str(Path(root).expanduser().resolve())


@functools.lru_cache(maxsize=8)
def _load_cached(name: str, root: str | None) -> tuple[ArrayDataset, ArrayDataset]:
    return _LOADERS[name](root)


def load_dataset(
    name: str, *, root: str | Path | None = None, cached: bool = True
) -> tuple[ArrayDataset, ArrayDataset]:
    """Load a real dataset by name, cached per process (arrays are read-only).

    Args:
        name: One of ``DATASET_NAMES``.
        root: Optional user data directory (see the module docstring).
        cached: False reads the files again and keeps nothing (a caller that
            copies the arrays anyway saves the cache's copy).

    Returns:
        ``(train, test)`` datasets.

    Raises:
        DatasetError: Unknown name, missing dataset (with how to get it) or a
            corrupt file.
    """
    if name not in _LOADERS:
        raise DatasetError(
            f"unknown dataset {name!r}; known: {', '.join(DATASET_NAMES)}"
        )
    canonical = None if name == "digits" else _canonical_root(root)
    if canonical is not None and Path(canonical).is_file():  # a worker's check
        raise DatasetError(f"data.root must be a directory, got the file {root}")
    return _load_cached(name, canonical) if cached else _LOADERS[name](canonical)


def available_datasets(root: str | Path | None = None) -> dict[str, str]:
    """Tell, for each real dataset, where it was found or how to get it.

    Only file presence is checked (nothing is parsed), so this is fast.

    Args:
        root: Optional user data directory.

    Returns:
        Name → ``"found at PATH"`` or ``"missing: <how to get it>"``, for every
        name in ``DATASET_NAMES``.
    """
    canonical = _canonical_root(root)
    status: dict[str, str] = {}
    for name in ("fashion_mnist", "mnist"):
        directory = find_idx_dir(_idx_candidates(name, canonical))
        status[name] = (
            f"found at {directory}"
            if directory is not None
            else f"missing: {_missing_message(name, canonical)}"
        )
    directory = find_cifar_dir(_cifar_candidates(canonical))
    status["cifar10"] = (
        f"found at {directory}"
        if directory is not None
        else f"missing: {_missing_message('cifar10', canonical)}"
    )
    import sklearn

    status["digits"] = f"found at {Path(sklearn.__file__).parent / 'datasets' / 'data'}"
    return status
