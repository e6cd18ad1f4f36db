import numpy as np
import pytest

from brorl_lib.simulator import compact, runner
from brorl_lib.simulator import engine as sim

SMALL = dict(vocab_size=2000, n_correct=10, steps=40)


def run(kind, settings, rollouts, seeds):
    batch = kind(settings, rollouts, seeds)
    for t in range(1, settings.steps + 1):
        batch.step(t)
    return batch, batch.results()


@pytest.mark.parametrize(
    "extra",
    [
        {},
        dict(seeded_init=False),
        dict(anchor_frozen=True),
        dict(seeded_init=False, anchor_frozen=True, lr=0.1),
        dict(correct_tokens="random", anchor_correct=True),
        dict(dtype="float32"),
        dict(worst_drop="running", lr=0.05),
        dict(vocab_size=1001),  # not a multiple of 16: the dense tensor ends in fused AdamW's scalar loop
    ],
)
def test_compact_rows_give_the_dense_rows_numbers_bit_for_bit(extra):
    settings = sim.SimSettings(**{**SMALL, **extra})
    rollouts, seeds = [4, 16, 4, 8], [0, 1, 2, 0]
    _, dense = run(sim.RowBatch, settings, rollouts, seeds)
    batch, small = run(compact.CompactRowBatch, settings, rollouts, seeds)
    assert dense.keys() == small.keys()
    for k in dense:
        np.testing.assert_array_equal(dense[k], small[k])
    assert int(batch.used.max()) <= batch.width <= batch.k < settings.vocab_size  # fewer slots than tokens


def test_a_class_whose_tokens_are_all_drawn_leaves_the_softmax():
    # the two correct tokens (class 1) are both drawn at the first step: each takes a slot of its own
    settings = sim.SimSettings(vocab_size=64, n_correct=2, steps=30, lr=0.2)
    _, dense = run(sim.RowBatch, settings, [64], [0])
    batch, small = run(compact.CompactRowBatch, settings, [64], [0])
    for k in dense:
        np.testing.assert_array_equal(dense[k], small[k])
    assert batch.members[0, 1] == 0 and batch.z[0, 1] == -np.inf and batch.p[0, 1] == 0


def test_logit_classes_keep_the_anchor_alone():
    z0 = np.array([[5.0, 3, 3, 0, 0, 0], [0.0, 0, 0, 0, 0, 0]])
    cls, sizes = compact.logit_classes(z0)
    assert cls.tolist() == [[0, 1, 1, 2, 2, 2], [0, 1, 1, 1, 1, 1]]
    assert sizes.tolist() == [[1, 2, 3], [1, 5, 0]]


def test_which_runs_are_compact():
    paper = sim.SimSettings()
    assert compact.is_compact(paper, 16) and not compact.is_compact(paper, 512)
    assert not compact.is_compact(sim.SimSettings(track_theory=True), 4)
    assert not compact.is_compact(sim.SimSettings(update_rule="theorem"), 4)


def test_shards_mixing_compact_and_dense_rows_repeat_one_thread(monkeypatch):
    settings = sim.SimSettings(vocab_size=4000, n_correct=20, steps=30)
    rollouts, seeds = [4, 2000, 8, 4, 512], [0, 1, 1, 2, 0]
    assert [compact.is_compact(settings, n) for n in rollouts] == [True, False, True, True, False]
    monkeypatch.setattr(runner, "cpu_shards", lambda s, rows: 1)
    one = runner.simulate_batch(settings, rollouts, seeds, progress=False)
    monkeypatch.setattr(runner, "cpu_shards", lambda s, rows: 2)
    two = runner.simulate_batch(settings, rollouts, seeds, progress=False)
    _, dense = run(sim.RowBatch, settings, rollouts, seeds)
    for k in one:
        np.testing.assert_array_equal(one[k], two[k])
        np.testing.assert_array_equal(one[k], dense[k])
