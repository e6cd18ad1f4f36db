import os

import matplotlib
import pytest
from hypothesis import settings

matplotlib.use("Agg")
settings.register_profile("deterministic", derandomize=True, print_blob=True)
settings.load_profile("deterministic")  # the same examples on every run and machine


@pytest.fixture
def out_dir(tmp_path, monkeypatch):
    """Artifacts of save_figure/save_table go to a fresh folder."""
    folder = tmp_path / "out"
    monkeypatch.setenv("BRORL_OUTPUT_DIR", str(folder))
    return folder


os.environ.setdefault("PYTHONHASHSEED", "0")
# the Ray clusters tests start run their workers at the tests' priority, not Ray's nice 15: beside busy processes a
# worker at nice 15 gets about 2% of a CPU (a two-node check took over 300 s beside 8 spinning processes, 17 s idle)
os.environ.setdefault("RAY_worker_niceness", "0")


@pytest.fixture(autouse=True)
def no_registered_run():
    """Each test starts with no notebook run registered (``core.variants``): a config built by one test never
    turns another test's artifacts into variants."""
    from brorl_lib.core import variants

    variants.clear_run()
    yield
    variants.clear_run()


@pytest.fixture(scope="module")
def one_torch_thread():
    """The tiny model's operations are too small to share between threads: on busy cores a second thread only
    waits (measured on 2 busy cores: test_rlvr.py 121 s with 2 threads, 40 s with 1)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
