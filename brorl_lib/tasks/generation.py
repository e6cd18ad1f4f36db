"""Reasoning Gym entries under fixed seeds: how the laptop RLVR, the verl data and the evaluation all
generate their instances.

``reasoning_gym.create_dataset(task, size=n, seed=s, **config)`` draws item i from seed s + i, so a
(task, size, seed, config) request fixes its entries and their order. Some generators iterate over sets
of strings (reasoning-gym 0.1.25: e.g. ``word_ladder``, ``polynomial_multiplication``,
``isomorphic_strings``, ``ransom_note``, ``knight_swap``), so their entries depend on Python's hash seed
as well; entries are therefore always generated with hash seed 0 (``PYTHONHASHSEED=0``, what ``make``
and the notebooks use), in one child process per call when this process runs with another hash seed.
Generators that print progress (``bf``) are silenced.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from brorl_lib.core.paths import REPO_ROOT


@dataclass(frozen=True)
class EntryRequest:
    """``size`` entries of reasoning_gym task ``task`` from seed ``seed``, with config options ``config``
    (name-value pairs besides size and seed; the task's defaults where absent)."""

    task: str
    size: int
    seed: int
    config: tuple[tuple[str, Any], ...] = ()


def entries(task: str, size: int, seed: int, **config: Any) -> list[dict]:
    """The ``size`` entries of one request, in order (see ``EntryRequest``)."""
    return generate([EntryRequest(task, size, seed, tuple(config.items()))])[0]


def generate(requests: Sequence[EntryRequest]) -> list[list[dict]]:
    """The entries of each request, in order, made with hash seed 0 (one child process for all requests
    when this process has another hash seed; its results are cached)."""
    requests = tuple(requests)
    if sys.flags.hash_randomization:
        return [list(found) for found in _generate_with_hash_seed_0(requests)]
    return _generate_here(requests)


def _generate_here(requests: Sequence[EntryRequest]) -> list[list[dict]]:
    """Entries made in this process, with its hash seed."""
    import reasoning_gym

    out = []
    with contextlib.redirect_stdout(io.StringIO()):  # some generators (bf) print progress dots
        for r in requests:
            data = reasoning_gym.create_dataset(r.task, size=r.size, seed=r.seed, **dict(r.config))
            out.append([data[i] for i in range(r.size)])
    return out


_CHILD = """
import pickle, sys
from brorl_lib.tasks.generation import _generate_here
with open(sys.argv[1], "rb") as fh:
    requests = pickle.load(fh)
with open(sys.argv[2], "wb") as fh:
    pickle.dump(_generate_here(requests), fh)
"""


@lru_cache(maxsize=64)
def _generate_with_hash_seed_0(requests: tuple[EntryRequest, ...]) -> tuple[tuple[dict, ...], ...]:
    """``_generate_here`` in a child Python started with PYTHONHASHSEED=0."""
    env = {
        **os.environ,
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    with tempfile.TemporaryDirectory() as tmp:
        asked, found = Path(tmp) / "requests.pkl", Path(tmp) / "entries.pkl"
        with open(asked, "wb") as fh:
            pickle.dump(requests, fh)
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(asked), str(found)], env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            tasks = sorted({r.task for r in requests})
            raise RuntimeError(
                f"generating the Reasoning Gym entries of {tasks} with PYTHONHASHSEED=0 failed:\n{done.stderr[-2000:]}"
            )
        with open(found, "rb") as fh:
            return tuple(tuple(e) for e in pickle.load(fh))
