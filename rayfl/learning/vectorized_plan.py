"""Batch plan and data windows of a vectorized local run over many clients.

The plan fixes, before any arithmetic, every client's mini-batch order with
:func:`rayfl.learning.train.batch_indices` (so it equals the per-client loop's),
stacks the clients by step count (descending) so that the clients still training
at step s are a prefix of the stack, and gathers their batches into padded data
windows: slot s of client i holds its batch s in the first ``b_is`` rows and
padding after it, with a per-row loss weight 1/b_is on real rows and 0 on padding.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from rayfl.learning.train import batch_indices

__all__ = [
    "BatchPlan",
    "DataWindow",
    "WindowScratch",
    "iter_windows",
    "plan_batches",
    "shared_rows",
]

WINDOW_BYTES = 16 << 20
"""Default memory budget of one data window's inputs."""

Dataset = tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]


@dataclass(frozen=True)
class BatchPlan:
    """Mini-batch order of m clients, stacked by step count (descending).

    The batches are flat arrays: ``lengths`` holds every batch's size (stacked
    client after client, step after step) and ``samples`` their sample indices
    end to end.

    Attributes:
        order: Stack position → client index in the caller's list, int64 (m,).
        steps: Steps of each stacked client, descending, int64 (m,).
        lengths: Rows of each batch, int64 (Σ steps,).
        samples: Sample indices of the batches, end to end, int64 (Σ lengths,).
        slot: Rows per batch slot: the largest batch of the run (≤ batch size).
    """

    order: npt.NDArray[np.int64]
    steps: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int64]
    samples: npt.NDArray[np.int64]
    slot: int

    @property
    def num_steps(self) -> int:
        """Steps of the longest client (0 when no client trains)."""
        return int(self.steps[0]) if len(self.steps) else 0

    @property
    def batches(self) -> list[list[npt.NDArray[np.int64]]]:
        """Index arrays of each stacked client's batches (views of ``samples``)."""
        flat = (
            np.split(self.samples, np.cumsum(self.lengths)[:-1])
            if len(self.lengths)
            else []
        )
        bounds = np.concatenate([[0], np.cumsum(self.steps)])
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def active(self, step: int) -> int:
        """Return how many stacked clients take step ``step`` (a prefix)."""
        return int(np.count_nonzero(self.steps > step))

    def chunk(self, first: int, size: int) -> BatchPlan:
        """Return the plan of stacked clients ``first .. first + size``."""
        bounds = np.concatenate([[0], np.cumsum(self.steps)])
        rows = np.concatenate([[0], np.cumsum(self.lengths)])
        last = min(first + size, len(self.steps))
        b0, b1 = int(bounds[first]), int(bounds[last])
        return BatchPlan(
            self.order[first:last],
            self.steps[first:last],
            self.lengths[b0:b1],
            self.samples[int(rows[b0]) : int(rows[b1])],
            self.slot,
        )


def plan_batches(
    sizes: Sequence[int],
    *,
    batch_size: int,
    local_epochs: int,
    local_steps: int | None,
    rngs: Sequence[np.random.Generator],
    slot: int | None = None,
) -> BatchPlan:
    """Draw every client's batch order and stack the clients by step count.

    Args:
        sizes: Train-split size of each client, length m.
        batch_size: Mini-batch size B.
        local_epochs: Epochs E (ignored when ``local_steps`` is set).
        local_steps: Steps S, or None to use epochs.
        rngs: One generator per client; each draws exactly what ``local_sgd``
            draws for that client (in the order of the clients, so one shared
            generator draws as a loop over the clients would).
        slot: Rows per batch slot; default the largest batch of these clients.
            A value fixed for the whole run (e.g. min(B, largest client of the
            run)) keeps every client's float rounding independent of which other
            clients are stacked with it.

    Returns:
        The plan.

    Raises:
        ValueError: If lengths differ, a client without samples must take steps,
            or ``slot`` is smaller than a batch.

    Example:
        >>> plan = plan_batches([10, 3], batch_size=4, local_epochs=1,
        ...                     local_steps=None, rngs=[np.random.default_rng(0)] * 2)
        >>> plan.steps.tolist(), plan.lengths.tolist(), plan.slot
        ([3, 1], [4, 4, 2, 3], 4)

    Implementation details:
        A client's batches are :func:`~rayfl.learning.train.batch_indices`'
        (tests/learning/test_vectorized.py checks them against it): per epoch
        one permutation cut into batches of B, the last one n mod B when B
        does not divide n. The lengths follow from the sizes alone, so only
        the permutations are drawn per client; the degenerate runs (E < 1 or
        S < 1, which still take one epoch or one batch) take
        ``batch_indices`` itself.
    """
    if len(sizes) != len(rngs):
        raise ValueError(f"need one rng per client: {len(sizes)} datasets, {len(rngs)}")
    n = np.asarray(sizes, dtype=np.int64).reshape(-1)
    for i in np.flatnonzero(n == 0)[:1]:
        if local_steps:
            raise ValueError(f"client {i} has no samples but local_steps={local_steps}")
    if (local_steps is not None and local_steps < 1) or (
        local_steps is None and local_epochs < 1
    ):
        return _plan_of_lists(n, batch_size, local_epochs, local_steps, rngs, slot)
    per_epoch = -(-n // batch_size)  # batches per epoch (0 for n = 0)
    if local_steps is None:
        counts, epochs = per_epoch * local_epochs, np.full(len(n), local_epochs)
    else:
        counts = np.full(len(n), local_steps, np.int64)
        epochs = -(-local_steps // np.maximum(per_epoch, 1))
    draws = [
        np.concatenate([rng.permutation(int(k)) for _ in range(int(e))])
        if e > 1
        else rng.permutation(int(k))
        for k, e, rng in zip(n.tolist(), epochs.tolist(), rngs, strict=True)
    ]
    order = np.argsort(-counts, kind="stable").astype(np.int64)
    steps = counts[order]
    client, lengths = _batch_lengths(n, per_epoch, order, steps, batch_size)
    used = np.zeros(len(n), np.int64)
    np.add.at(used, client, lengths)
    flat = _end_to_end([draws[c][: used[c]] for c in order.tolist()])
    return BatchPlan(order, steps, lengths, flat, _slot(lengths, slot))


def _batch_lengths(
    n: npt.NDArray[np.int64],
    per_epoch: npt.NDArray[np.int64],
    order: npt.NDArray[np.int64],
    steps: npt.NDArray[np.int64],
    batch_size: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each batch's client (caller's index) and rows, stacked client after client.

    An epoch of n samples is ``per_epoch`` = ⌈n/B⌉ batches of B rows, the last
    n − B·(per_epoch − 1).
    """
    client = np.repeat(order, steps)
    step = np.arange(int(steps.sum())) - np.repeat(np.cumsum(steps) - steps, steps)
    last = n[client] - batch_size * (per_epoch[client] - 1)
    within = step % np.maximum(per_epoch[client], 1)
    lengths = np.where(within < per_epoch[client] - 1, batch_size, last)
    return client, lengths.astype(np.int64)


def _slot(lengths: npt.NDArray[np.int64], slot: int | None) -> int:
    """The plan's slot: ``slot``, checked against the largest batch, or that batch."""
    largest = int(lengths.max()) if len(lengths) else 1
    if slot is None:
        return largest
    if slot < largest:
        raise ValueError(f"slot={slot} is smaller than a batch of {largest} rows")
    return int(slot)


def _plan_of_lists(
    n: npt.NDArray[np.int64],
    batch_size: int,
    local_epochs: int,
    local_steps: int | None,
    rngs: Sequence[np.random.Generator],
    slot: int | None,
) -> BatchPlan:
    """:func:`plan_batches` by :func:`~rayfl.learning.train.batch_indices` per client."""
    batches = [
        batch_indices(
            int(k),
            batch_size=batch_size,
            local_epochs=local_epochs,
            local_steps=local_steps,
            rng=rng,
        )
        for k, rng in zip(n.tolist(), rngs, strict=True)
    ]
    counts = np.array([len(b) for b in batches], dtype=np.int64)
    order = np.argsort(-counts, kind="stable").astype(np.int64)
    stacked = [b for i in order for b in batches[i]]
    lengths = np.array([len(b) for b in stacked], np.int64)
    flat = _end_to_end(stacked)
    return BatchPlan(order, counts[order], lengths, flat, _slot(lengths, slot))


def _end_to_end(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    """The index arrays ``parts`` end to end, int64 (empty without parts)."""
    if not parts:
        return np.zeros(0, np.int64)
    return np.concatenate(parts).astype(np.int64, copy=False)


@dataclass(frozen=True)
class DataWindow:
    """Padded batches of steps ``[start, stop)`` for the first ``k`` stacked clients.

    Attributes:
        start: First step of the window.
        stop: One past its last step.
        x: Inputs, float32 (k, (stop − start)·slot, *input_shape).
        y: Labels, int64 (k, (stop − start)·slot); padding rows hold label 0.
        loss_weight: 1/b_is on real rows, 0 on padding, float32 (k, (stop − start)·slot).
    """

    start: int
    stop: int
    x: torch.Tensor
    y: torch.Tensor
    loss_weight: torch.Tensor

    def batch(
        self, step: int, active: int, slot: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return views ``(x, y, loss_weight)`` of step ``step`` for ``active`` clients.

        Args:
            step: Step index, ``start ≤ step < stop``.
            active: Number of stacked clients taking this step.
            slot: Rows per batch slot.

        Returns:
            Shapes (active, slot, *input_shape), (active, slot), (active, slot).
        """
        rows = slice((step - self.start) * slot, (step - self.start + 1) * slot)
        return (
            self.x[:active, rows],
            self.y[:active, rows],
            self.loss_weight[:active, rows],
        )


def shared_rows(
    arrays: Sequence[np.ndarray],
) -> tuple[np.ndarray, npt.NDArray[np.int64]] | None:
    """Return one array spanning row slices of a common buffer, and their offsets.

    Clients' splits are usually row slices of one array (``FederatedData``); then
    one ``index_select`` per window gathers every client's batches at once.

    Args:
        arrays: C-contiguous arrays of equal dtype and trailing shape.

    Returns:
        ``(span, offsets)`` with ``arrays[i] == span[offsets[i] : offsets[i] +
        len(arrays[i])]`` (read-only view, no copy), or None when the non-empty
        arrays are not row slices of one memory owner.

    Example:
        >>> base = np.arange(12.0).reshape(6, 2)
        >>> span, offsets = shared_rows([base[4:6], base[1:3]])
        >>> span.shape, offsets.tolist()
        ((5, 2), [3, 0])
    """
    full = [a for a in arrays if len(a)]
    if not full:
        return None
    first = full[0]
    row_bytes = first.itemsize * int(np.prod(first.shape[1:], dtype=np.int64))
    for a in full:
        if (
            a.base is None
            or a.base is not first.base
            or not a.flags.c_contiguous
            or a.dtype != first.dtype
            or a.shape[1:] != first.shape[1:]
        ):
            return None
    addresses = [a.__array_interface__["data"][0] for a in arrays]
    pointers = np.array(addresses)
    pointers[[len(a) == 0 for a in arrays]] = pointers[[len(a) > 0 for a in arrays]][0]
    low = int(pointers.min())
    high = max(
        int(p) + len(a) * row_bytes for p, a in zip(pointers, arrays, strict=True)
    )
    if row_bytes == 0 or np.any((pointers - low) % row_bytes):
        return None
    nonempty = [p for p, a in zip(addresses, arrays, strict=True) if len(a)]
    anchor = full[int(np.argmin(nonempty))]
    span = np.lib.stride_tricks.as_strided(
        anchor,
        shape=((high - low) // row_bytes, *first.shape[1:]),
        strides=(row_bytes, *first.strides[1:]),
        writeable=False,
    )
    return span, ((pointers - low) // row_bytes).astype(np.int64)


class WindowScratch:
    """Window tensors reused across windows and chunks.

    The first-touch page faults of a fresh multi-MB buffer cost about as much as
    the gather that fills it.
    """

    def __init__(self) -> None:
        self._x = torch.empty(0)
        self._y = torch.empty(0, dtype=torch.int64)
        self._w = torch.empty(0)

    def get(
        self, clients: int, rows: int, sample_shape: tuple[int, ...]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return uninitialised x (k, rows, *shape), y (k, rows), weight (k, rows)."""
        size = clients * rows * int(np.prod(sample_shape, dtype=np.int64))
        if self._x.numel() < size:
            self._x = torch.empty(size)
        if self._y.numel() < clients * rows:
            self._y = torch.empty(clients * rows, dtype=torch.int64)
            self._w = torch.empty(clients * rows)
        x = self._x[:size].view(clients, rows, *sample_shape)
        y = self._y[: clients * rows].view(clients, rows)
        return x, y, self._w[: clients * rows].view(clients, rows)


def iter_windows(
    plan: BatchPlan,
    datasets: Sequence[Dataset],
    *,
    scratch: WindowScratch,
) -> Iterator[DataWindow]:
    """Yield the data windows of a plan, each at most about ``WINDOW_BYTES`` of inputs.

    Args:
        plan: The batch plan.
        datasets: ``(x, y)`` per client in the caller's order (``plan.order`` maps
            stack positions to it); x float32 (n_i, *input_shape), y int64 (n_i,).
        scratch: Buffers to write the windows into (a window is valid until the
            next one is yielded).

    Yields:
        Consecutive windows covering steps ``[0, plan.num_steps)``.
    """
    if plan.num_steps == 0:
        return
    x_np = [np.asarray(datasets[i][0], dtype=np.float32) for i in plan.order]
    y_np = [np.asarray(datasets[i][1], dtype=np.int64) for i in plan.order]
    sample_shape = tuple(x_np[0].shape[1:])
    row_bytes = 4 * int(np.prod(sample_shape, dtype=np.int64))
    span = max(1, WINDOW_BYTES // max(1, plan.active(0) * plan.slot * row_bytes))
    shared_x, shared_y = shared_rows(x_np), shared_rows(y_np)
    shared = None
    if shared_x is not None and shared_y is not None:
        x_all = torch.from_numpy(shared_x[0]).reshape(len(shared_x[0]), row_bytes // 4)
        shared = (x_all, torch.from_numpy(shared_y[0]), shared_x[1], shared_y[1])
    xs: list[torch.Tensor] = []  # per client, only without a shared span
    ys: list[torch.Tensor] = []
    if shared is None:
        xs = [torch.from_numpy(a).reshape(len(a), row_bytes // 4) for a in x_np]
        ys = [torch.from_numpy(a) for a in y_np]
    flat = _FlatBatches.of(plan)
    start = 0
    while start < plan.num_steps:
        k = plan.active(start)
        stop = min(plan.num_steps, start + span)
        rows = (stop - start) * plan.slot
        index, weight = flat.window(start, stop, k, plan.slot)
        x, y, w = scratch.get(k, rows, sample_shape)
        if shared is not None:
            x_all, y_all, x_off, y_off = shared
            flat_x = torch.from_numpy((index + x_off[:k, None]).reshape(-1))
            flat_y = torch.from_numpy((index + y_off[:k, None]).reshape(-1))
            torch.index_select(x_all, 0, flat_x, out=x.view(k * rows, -1))
            torch.index_select(y_all, 0, flat_y, out=y.view(-1))
        else:
            index_t = torch.from_numpy(index)
            for i in range(k):
                torch.index_select(xs[i], 0, index_t[i], out=x[i].view(rows, -1))
                torch.index_select(ys[i], 0, index_t[i], out=y[i])
        w.copy_(torch.from_numpy(weight))
        yield DataWindow(start, stop, x, y, w)
        start = stop


@dataclass(frozen=True)
class _FlatBatches:
    """Every batch of a plan as flat arrays: per batch, and per sample drawn.

    Attributes:
        client: Stack position of each batch (stack order, then step order).
        step: Its step.
        inverse: 1/b of each batch, float32 (the float64 1/b, rounded).
        batch: The batch of each sample entry.
        position: The entry's row within its batch.
        sample: The sample index (the batch's value).
    """

    client: npt.NDArray[np.int64]
    step: npt.NDArray[np.int64]
    inverse: npt.NDArray[np.float32]
    batch: npt.NDArray[np.int64]
    position: npt.NDArray[np.int64]
    sample: npt.NDArray[np.int64]

    @classmethod
    def of(cls, plan: BatchPlan) -> _FlatBatches:
        """Flatten the plan's batches."""
        lens = plan.lengths
        client = np.repeat(np.arange(len(plan.steps)), plan.steps)
        step = np.arange(len(lens)) - np.repeat(
            np.cumsum(plan.steps) - plan.steps, plan.steps
        )
        total = int(lens.sum())
        batch = np.repeat(np.arange(len(lens)), lens)
        position = np.arange(total) - (np.cumsum(lens) - lens)[batch]
        with np.errstate(divide="ignore"):
            inverse = (1.0 / lens).astype(np.float32)
        return cls(client, step, inverse, batch, position, plan.samples)

    def window(
        self, start: int, stop: int, k: int, slot: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Sample indices and loss weights of steps [start, stop) of the first k clients.

        Shapes (k, (stop − start)·slot); padding rows hold index 0, weight 0.
        """
        rows = (stop - start) * slot
        index = np.zeros(k * rows, dtype=np.int64)
        weight = np.zeros(k * rows, dtype=np.float32)
        offset = self.client * rows + (self.step - start) * slot
        batch, position, sample = self.batch, self.position, self.sample
        inside = (self.step >= start) & (self.step < stop) & (self.client < k)
        if not inside.all():
            keep = inside[batch]
            batch, position, sample = batch[keep], position[keep], sample[keep]
        at = offset[batch] + position
        index[at] = sample
        weight[at] = self.inverse[batch]
        return index.reshape(k, rows), weight.reshape(k, rows)
