"""Independent pieces of a gradient update run at once, one per CPU thread: a learner's twin critics.

The two critics of HER-SAC, HER-TD3 and HER-CrossQ share no weights, so their forward and backward
passes need not wait for each other. On a CPU each pass is a chain of small matrix products that one
core runs about as fast as two (at a batch of 256 the products are too short to split), so the second
core does more by taking the other critic whole. torch releases Python's lock inside every operator,
which lets the two chains overlap.

The numbers are the same as one after the other: each critic's operators run in the same order on one
thread, and no two threads write the same tensor (each critic's gradients are its own).

Grad mode and autocast are per thread in torch, so a piece sets its own (``torch.no_grad()``,
``learner.autocast()``) inside the function it hands over.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, Sequence, TypeVar

import torch

T = TypeVar("T")
R = TypeVar("R")


class SideBySide:
    """``map(fn, items)``: ``fn`` on every item, the first here and the others on worker threads (up to
    ``threads - 1`` of them); with ``threads`` 1, one after the other on this thread."""

    def __init__(self, threads: int = 1):
        self.threads = int(threads)
        self._pool: ThreadPoolExecutor | None = None  # started at first use, after any env workers are forked

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if self.threads < 2 or len(items) < 2:
            return [fn(item) for item in items]
        if self._pool is None:
            # each worker splits a product over as many threads as this one does (OpenMP's count is per thread)
            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="her-rl-critic",
                                            initializer=torch.set_num_threads, initargs=(torch.get_num_threads(),))
        later = [self._pool.submit(fn, item) for item in items[1:]]
        try:
            first = fn(items[0])
        finally:  # whatever raised, no piece outlives the call: the next update's gradients are its own
            wait(later)
        return [first, *(f.result() for f in later)]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
