"""The benchmark's numpy baseline implements the same update as the torch simulator."""

import importlib.util

import pytest

from brorl_lib.paths import REPO_ROOT
from brorl_lib.simulator import SimSettings, simulate


def load(name):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_numpy_baseline_matches_torch_simulator():
    bench = load("simulator")
    settings = SimSettings(vocab_size=200, n_correct=20, steps=60, lr=1e-2)
    numpy_mass = bench.numpy_run(settings, n=20000, seed=0, steps=60)
    torch_mass = simulate(settings, [20000], [0], progress=False)["correct_mass"].iloc[-1]
    start = simulate(SimSettings(vocab_size=200, n_correct=20, steps=1), [4], [0], progress=False)["correct_mass"].iloc[0]
    assert torch_mass - start > 0.05  # both moved a lot, and to the same place (different random draws)
    assert numpy_mass == pytest.approx(torch_mass, abs=2e-3)
