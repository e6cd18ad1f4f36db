"""Running the simulator: rows shared between threads, each thread's rows in one dense and one compact batch,
and the long-format results of every (N, seed) run."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from brorl_lib.core.precision import declare
from brorl_lib.core.validation import check_int
from brorl_lib.simulator.compact import CompactRowBatch, is_compact
from brorl_lib.simulator.engine import WORST_DROP_DECIMALS, RowBatch, Rows, SimSettings, check_runs, merge_is_cheaper

# our choice, from CPU timings on 2 cores (100 steps, 8 runs, N from 4 to 51,200): sharing the rows between
# two threads took 1.6x as long at 51,200 numbers (rows x V) a thread, about as long at 128,000, 0.85x at 256,000
SHARD_MIN_ELEMENTS = 100_000


def row_cost(settings: SimSettings, n: int) -> int:
    """Rough work of one row per step, in token operations, to share rows between threads. A dense row: V for
    the dense passes, 3 per draw, and V more when the draws are searched by merging; fitted to CPU timings at
    V=128,000, one thread (a row at N=51,200 costs about 3.2 rows at N=4). A compact row: 3V/5 and 3 per draw
    (same timings: 4 compact rows at N from 4 to 16 took 0.43 ms a row and step, a dense row at N=4 0.71 ms)."""
    v = settings.vocab_size
    if is_compact(settings, n):
        return 3 * v // 5 + 3 * n
    return v + 3 * n + (v if merge_is_cheaper(n, v, torch.device("cpu")) else 0)


def shard_rows(settings: SimSettings, rollouts: list[int], shards: int) -> list[list[int]]:
    """Row indices split into at most ``shards`` lists of about equal work (longest first, to the least loaded)."""
    loads, parts = [0] * shards, [[] for _ in range(shards)]
    cost = [row_cost(settings, n) for n in rollouts]
    for b in sorted(range(len(rollouts)), key=lambda b: -cost[b]):
        k = loads.index(min(loads))
        parts[k].append(b)
        loads[k] += cost[b]
    return [sorted(part) for part in parts if part]


def cpu_shards(settings: SimSettings, rows: int) -> int:
    """Threads to run a batch on. On CPU, one per torch thread, each running torch on one core, so that the
    O(N) draw work and the serial scans of different rows run side by side; but no more than leave each
    thread SHARD_MIN_ELEMENTS of rows x V, below which the threads mostly wait for each other's Python.
    On CUDA, one."""
    if settings.device != "cpu":
        return 1
    return max(1, min(torch.get_num_threads(), rows, rows * settings.vocab_size // SHARD_MIN_ELEMENTS))


def shard_batches(
    settings: SimSettings, rollouts: list[int], seeds: list[int], part: list[int]
) -> list[tuple[list[int], Rows]]:
    """Rows ``part`` as batches, each with the rows it holds: those with few draws in one compact batch, the
    others in one dense batch."""
    batches = []
    for kind, compact in ((CompactRowBatch, True), (RowBatch, False)):
        rows = [b for b in part if is_compact(settings, rollouts[b]) == compact]
        if rows:
            batches.append((rows, kind(settings, [rollouts[b] for b in rows], [seeds[b] for b in rows])))
    return batches


def run_steps(
    shards: list[list[Rows]], steps: int, desc: str, progress: bool, on_step: Callable[[], None] | None
) -> None:
    """Steps 1..steps of every shard's batches; ``on_step`` once every shard has made a step.

    Several shards run side by side, each on its own thread doing torch ops on one core (no shard waits
    for another between steps); the caller's thread only counts steps and calls ``on_step``. If that
    raises, or a batch fails, every shard stops after its current step and the error propagates.
    """
    ticks = tqdm(range(1, steps + 1), desc=desc, disable=not progress, mininterval=1)
    if len(shards) == 1:
        for t in ticks:
            for batch in shards[0]:
                batch.step(t)
            if on_step is not None:
                on_step()
        return
    threads, stop = torch.get_num_threads(), threading.Event()
    done = [queue.SimpleQueue() for _ in shards]

    def work(batches: list[Rows], finished: queue.SimpleQueue) -> None:
        torch.set_num_threads(1)
        try:
            for t in range(1, steps + 1):
                if stop.is_set():
                    return
                for batch in batches:
                    batch.step(t)
                finished.put(t)
        finally:
            finished.put(None)  # read only if the batch stopped early: its future holds the error

    try:
        with ThreadPoolExecutor(len(shards)) as pool:
            try:
                futures = [pool.submit(work, b, finished) for b, finished in zip(shards, done)]
                for _ in ticks:
                    for future, finished in zip(futures, done):
                        if finished.get() is None:
                            future.result()  # raises the batch's error
                    if on_step is not None:
                        on_step()
            finally:
                stop.set()
    finally:
        torch.set_num_threads(threads)  # the workers set the default for new threads to one


def simulate_batch(
    settings: SimSettings,
    rollouts: list[int],
    seeds: list[int],
    progress: bool = True,
    on_step: Callable[[], None] | None = None,
) -> dict[str, np.ndarray]:
    """Run rows (rollouts[b], seeds[b]) together; metrics as (steps + 1, rows) arrays, step 0 first.

    On CPU the rows are shared between threads (``cpu_shards``); each row's numbers do not depend on
    which rows share its tensors or thread. ``on_step`` is called after every step (a live view's
    progress bar; it may raise to stop the run)."""
    parts = shard_rows(settings, rollouts, cpu_shards(settings, len(rollouts)))
    shards = [shard_batches(settings, rollouts, seeds, part) for part in parts]
    run_steps(
        [[batch for _, batch in shard] for shard in shards],
        settings.steps,
        f"simulating {len(rollouts)} runs",
        progress,
        on_step,
    )
    out: dict[str, np.ndarray] = {}
    for rows, batch in (held for shard in shards for held in shard):
        for k, a in batch.results().items():
            out.setdefault(k, np.empty((settings.steps + 1, len(rollouts))))[:, rows] = a
    return out


def simulate(
    settings: SimSettings,
    rollouts: list[int],
    seeds: list[int],
    max_batch_rows: int = 16,
    progress: bool = True,
    on_step: Callable[[], None] | None = None,
) -> pd.DataFrame:
    """Every (N, seed) run, long format: columns N, seed, step, correct_mass, pct_improved, worst_drop.

    Runs are batched ``max_batch_rows`` at a time (memory ~ 10 x rows x V numbers).
    """
    check_runs(rollouts, seeds)
    check_int("max_batch_rows", max_batch_rows, low=1)
    runs = [(int(r), int(s)) for r in rollouts for s in seeds]
    frames = []
    for start in range(0, len(runs), max_batch_rows):
        chunk = runs[start : start + max_batch_rows]
        res = simulate_batch(settings, [r for r, _ in chunk], [s for _, s in chunk], progress, on_step)
        steps = np.arange(settings.steps + 1)
        for b, (r, s) in enumerate(chunk):
            frames.append(pd.DataFrame({"N": r, "seed": s, "step": steps, **{k: v[:, b] for k, v in res.items()}}))
    return declare(pd.concat(frames, ignore_index=True), decimals={"worst_drop": WORST_DROP_DECIMALS})
