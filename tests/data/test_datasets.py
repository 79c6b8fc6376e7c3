from __future__ import annotations

import gzip
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from rayfl.data import (
    ArrayDataset,
    DatasetError,
    available_datasets,
    cifar10,
    digits,
    fashion_mnist,
    load_dataset,
    make_synthetic,
    mnist,
)
from rayfl.data import datasets as datasets_module

IDX_STEMS = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")


def idx_bytes(array: np.ndarray) -> bytes:
    """Encode a uint8 array in the real IDX format (magic 0x0000_08_ndim)."""
    header = bytes([0, 0, 0x08, array.ndim])
    dims = b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + dims + array.astype(np.uint8).tobytes()


def write_idx_dataset(
    directory: Path, *, gz: bool, n_train: int = 6, n_test: int = 4
) -> dict[str, np.ndarray]:
    """Write the four MNIST-style files with known pixels and labels."""
    rng = np.random.default_rng(0)
    arrays = {
        "train_images": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train_labels": np.arange(n_train, dtype=np.uint8) % 10,
        "test_images": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "test_labels": (np.arange(n_test, dtype=np.uint8) + 3) % 10,
    }
    arrays["train_images"][0, 0, :2] = [0, 255]  # known extremes
    directory.mkdir(parents=True, exist_ok=True)
    for key, array in arrays.items():
        data = idx_bytes(array)
        name = IDX_STEMS[key] + (".gz" if gz else "")
        (directory / name).write_bytes(gzip.compress(data) if gz else data)
    return arrays


def write_cifar(directory: Path, *, per_batch: int = 3, protocol: int = 2) -> None:
    """Write the six CIFAR-10 batches as pickled dicts with bytes keys."""
    rng = np.random.default_rng(1)
    directory.mkdir(parents=True, exist_ok=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for index, name in enumerate(names):
        batch = {
            b"batch_label": name.encode(),
            b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
            b"labels": [(index + j) % 10 for j in range(per_batch)],
            b"filenames": [b"img.png"] * per_batch,
        }
        (directory / name).write_bytes(pickle.dumps(batch, protocol=protocol))


# ---------------------------------------------------------------- IDX loaders


@pytest.mark.parametrize(
    ("loader", "layout", "gz"),
    [
        (mnist, "MNIST/raw", True),
        (mnist, "MNIST/raw", False),
        (mnist, "", True),
        (fashion_mnist, "FashionMNIST/raw", True),
        (fashion_mnist, "FashionMNIST/raw", False),
        (fashion_mnist, "", False),
    ],
    ids=[
        "mnist-torchvision-gz",
        "mnist-torchvision-raw",
        "mnist-flat-gz",
        "fmnist-torchvision-gz",
        "fmnist-torchvision-raw",
        "fmnist-flat-raw",
    ],
)
def test_idx_loader_reads_real_format(tmp_path, loader, layout, gz):
    # Arrange
    arrays = write_idx_dataset(tmp_path / layout, gz=gz)
    # Act
    train, test = loader(str(tmp_path))
    # Assert
    assert train.x.shape == (6, 1, 28, 28) and test.x.shape == (4, 1, 28, 28)
    assert train.x.dtype == np.float32 and train.y.dtype == np.int64
    assert train.num_classes == 10 and train.input_shape == (1, 28, 28)
    np.testing.assert_array_equal(train.y, arrays["train_labels"])
    np.testing.assert_array_equal(test.y, arrays["test_labels"])
    expected = (arrays["train_images"][:, None] / 255.0 - 0.5) / 0.5
    np.testing.assert_allclose(train.x, expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(train.x[0, 0, 0, :2], [-1.0, 1.0], atol=1e-7)


def test_cached_arrays_are_read_only(tmp_path):
    # Arrange
    write_idx_dataset(tmp_path / "MNIST" / "raw", gz=True)
    # Act
    first, _ = load_dataset("mnist", root=tmp_path)
    second, _ = load_dataset("mnist", root=str(tmp_path))
    # Assert
    assert first is second
    with pytest.raises(ValueError, match="read-only"):
        first.x[0] = 0.0


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-10])


def _bad_magic(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[0] = 0x1F
    path.write_bytes(bytes(data))


def _wrong_dims(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[4:8] = (7).to_bytes(4, "big")  # header says 7 images, file holds 6
    path.write_bytes(bytes(data))


def _trailing(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"\x00\x00")


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (_truncate, "truncated"),
        (_bad_magic, "bad IDX magic"),
        (_wrong_dims, "truncated"),
        (_trailing, "trailing bytes"),
    ],
    ids=["truncated", "bad-magic", "wrong-dims", "trailing-bytes"],
)
def test_corrupt_idx_raises_dataset_error_naming_file(tmp_path, corrupt, message):
    # Arrange
    write_idx_dataset(tmp_path, gz=False)
    bad = tmp_path / IDX_STEMS["train_images"]
    corrupt(bad)
    # Act / Assert
    with pytest.raises(DatasetError, match=message) as info:
        mnist(str(tmp_path))
    assert str(bad) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_truncated_gzip_raises_dataset_error(tmp_path):
    # Arrange
    write_idx_dataset(tmp_path, gz=True)
    bad = tmp_path / (IDX_STEMS["train_labels"] + ".gz")
    bad.write_bytes(bad.read_bytes()[:15])
    # Act / Assert
    with pytest.raises(DatasetError, match="gzip") as info:
        mnist(str(tmp_path))
    assert str(bad) in str(info.value)


def test_mismatched_image_and_label_counts(tmp_path):
    # Arrange
    write_idx_dataset(tmp_path, gz=False)
    labels = tmp_path / IDX_STEMS["test_labels"]
    labels.write_bytes(idx_bytes(np.zeros(3, dtype=np.uint8)))
    # Act / Assert
    with pytest.raises(DatasetError, match="4 images but .* 3 labels"):
        mnist(str(tmp_path))


def test_missing_mnist_says_how_to_provide_it(tmp_path):
    with pytest.raises(DatasetError, match="MNIST/raw") as info:
        mnist(str(tmp_path))
    assert "cannot download" in str(info.value)


def test_missing_fashion_mnist_gives_install_hint(tmp_path, monkeypatch):
    # Arrange
    monkeypatch.setattr(datasets_module, "FASHION_MNIST_DIR", tmp_path / "nowhere")
    # Act / Assert
    with pytest.raises(DatasetError) as info:
        fashion_mnist(str(tmp_path))
    message = str(info.value)
    assert "apt-get install dataset-fashion-mnist" in message
    assert "FashionMNIST/raw" in message


def test_unknown_dataset_lists_known_names():
    with pytest.raises(DatasetError, match="fashion_mnist, mnist, cifar10, digits"):
        load_dataset("imagenet")


# ---------------------------------------------------------------- CIFAR-10


@pytest.mark.parametrize(
    ("layout", "protocol"),
    [("cifar-10-batches-py", 2), ("cifar-10-batches-py", 5), ("", 4)],
    ids=["torchvision-proto2", "torchvision-proto5", "flat-proto4"],
)
def test_cifar10_reads_pickled_batches(tmp_path, layout, protocol):
    # Arrange
    write_cifar(tmp_path / layout, protocol=protocol)
    batch = pickle.loads((tmp_path / layout / "data_batch_1").read_bytes())
    # Act
    train, test = cifar10(str(tmp_path))
    # Assert
    assert train.x.shape == (15, 3, 32, 32) and test.x.shape == (3, 3, 32, 32)
    assert train.x.dtype == np.float32 and test.y.dtype == np.int64
    np.testing.assert_array_equal(test.y, [5, 6, 7])
    first = batch[b"data"][0].reshape(3, 32, 32) / 255.0
    np.testing.assert_allclose(train.x[0], (first - 0.5) / 0.5, atol=1e-6)


def test_cifar10_accepts_python2_module_names(tmp_path):
    # Arrange: the real files name numpy.core.multiarray (Python 2 era numpy)
    write_cifar(tmp_path, protocol=2)
    for path in tmp_path.iterdir():
        data = path.read_bytes().replace(b"numpy._core.", b"numpy.core.")
        path.write_bytes(data)
    # Act
    train, _ = cifar10(str(tmp_path))
    # Assert
    assert train.x.shape == (15, 3, 32, 32)


class _Exploit:
    def __reduce__(self):
        return (os.getcwd, ())


@pytest.mark.parametrize(
    "batch",
    [
        {b"labels": [1]},
        {b"data": np.zeros((2, 100), np.uint8), b"labels": [1, 2]},
        {b"data": np.zeros((2, 3072), np.uint8), b"labels": [1, 12]},
        {b"data": _Exploit(), b"labels": [1]},
    ],
    ids=["no-data-key", "wrong-width", "label-out-of-range", "foreign-global"],
)
def test_bad_cifar_batch_raises_dataset_error(tmp_path, batch):
    # Arrange
    write_cifar(tmp_path)
    bad = tmp_path / "data_batch_3"
    bad.write_bytes(pickle.dumps(batch, protocol=2))
    # Act / Assert
    with pytest.raises(DatasetError) as info:
        cifar10(str(tmp_path))
    assert str(bad) in str(info.value)


def test_missing_cifar10_explains_python_batches(tmp_path):
    with pytest.raises(DatasetError, match="cifar-10-batches-py") as info:
        cifar10(str(tmp_path))
    assert "python version" in str(info.value)
    assert "cannot download" in str(info.value)


# ---------------------------------------------------------------- availability


def test_available_datasets_reports_found_and_missing(tmp_path):
    # Arrange
    write_idx_dataset(tmp_path / "MNIST" / "raw", gz=True)
    # Act
    status = available_datasets(tmp_path)
    # Assert
    assert set(status) == {"fashion_mnist", "mnist", "cifar10", "digits"}
    assert status["mnist"] == f"found at {tmp_path.resolve() / 'MNIST' / 'raw'}"
    assert status["cifar10"].startswith("missing:")
    assert "cifar-10-batches-py" in status["cifar10"]
    assert status["digits"].startswith("found at")


# ---------------------------------------------------------------- digits


def test_digits_is_real_sklearn_data_with_stratified_split():
    # Act
    train, test = digits()
    # Assert
    assert len(train) + len(test) == 1797
    assert train.input_shape == (1, 8, 8) and train.num_classes == 10
    assert train.x.min() >= -1.0 and train.x.max() <= 1.0
    fraction = np.bincount(test.y, minlength=10) / np.bincount(
        np.concatenate([train.y, test.y]), minlength=10
    )
    np.testing.assert_allclose(fraction, 0.2, atol=0.01)
    again, _ = digits()
    np.testing.assert_array_equal(again.y, train.y)


def test_array_dataset_rejects_wrong_dtype():
    with pytest.raises(DatasetError, match="float32"):
        ArrayDataset(
            x=np.zeros((2, 3)), y=np.zeros(2, np.int64), num_classes=2, name="t"
        )


# ---------------------------------------------------------------- Fashion-MNIST


@pytest.mark.skipif(not FASHION_DIR.is_dir(), reason="dataset-fashion-mnist missing")
def test_real_fashion_mnist_from_debian_package():
    # Act
    train, test = load_dataset("fashion_mnist")
    # Assert
    assert train.x.shape == (60000, 1, 28, 28) and test.x.shape == (10000, 1, 28, 28)
    assert train.num_classes == 10
    np.testing.assert_allclose(np.bincount(train.y), 6000, rtol=0.05)
    np.testing.assert_allclose(np.bincount(test.y), 1000, rtol=0.05)
    assert train.x.min() == -1.0 and train.x.max() == 1.0


# ---------------------------------------------------------------- FedProx synthetic


def _synthetic(alpha, beta, seed=0, num_clients=100, size=60):
    return make_synthetic(
        num_clients=num_clients,
        alpha=alpha,
        beta=beta,
        rng=np.random.default_rng(seed),
        min_samples=size,
        max_samples=size,
    )


def test_synthetic_shapes_and_labels():
    # Act
    data = make_synthetic(
        num_clients=30,
        alpha=0.5,
        beta=0.5,
        rng=np.random.default_rng(3),
        min_samples=50,
        max_samples=400,
    )
    # Assert
    sizes = np.array([len(y) for _, y in data])
    assert len(data) == 30 and sizes.min() >= 50 and sizes.max() <= 400
    assert all(x.shape == (len(y), 60) and x.dtype == np.float32 for x, y in data)
    assert all(y.dtype == np.int64 and y.min() >= 0 and y.max() < 10 for _, y in data)
    assert sizes.std() > 0  # lognormal sizes


@pytest.mark.parametrize("beta", [0.0, 1.0, 2.0], ids=["beta0", "beta1", "beta2"])
def test_synthetic_feature_spread_matches_closed_form(beta):
    # Arrange: v_k ~ N(B_k, 1), B_k ~ N(0, β) ⇒ E||v_k − v̄||² ≈ dim·(1 + β²)
    data = _synthetic(1.0, beta, num_clients=200)
    # Act
    means = np.array([x.mean(axis=0) for x, _ in data])
    spread = ((means - means.mean(axis=0)) ** 2).sum(axis=1).mean()
    # Assert
    np.testing.assert_allclose(spread, 60 * (1 + beta**2), rtol=0.2)


def test_synthetic_label_heterogeneity_grows_with_beta():
    # Arrange
    def mean_label_entropy(data):
        counts = np.array([np.bincount(y, minlength=10) for _, y in data])
        p = counts / counts.sum(axis=1, keepdims=True)
        logs = np.log(np.where(p > 0, p, 1.0))
        return float(-(p * logs).sum(axis=1).mean())

    # Act
    homogeneous = mean_label_entropy(_synthetic(0.0, 0.0))
    heterogeneous = mean_label_entropy(_synthetic(1.0, 3.0))
    # Assert: more peaked (less diverse) local label distributions
    assert heterogeneous < 0.75 * homogeneous


def test_synthetic_alpha_does_not_change_labels():
    # u_k shifts every class logit equally (W_k, b_k share the mean u_k)
    low = _synthetic(0.0, 1.0, seed=5, num_clients=20)
    high = _synthetic(5.0, 1.0, seed=5, num_clients=20)
    agreement = np.mean(
        [np.mean(a == b) for (_, a), (_, b) in zip(low, high, strict=True)]
    )
    np.testing.assert_allclose(agreement, 1.0, atol=0.01)
