"""Same bytes on any machine: values a few ULPs apart (what another CPU, BLAS or thread count gives) make
byte-identical CSV, Markdown, LaTeX, PDF and PNG files."""

import numpy as np
import pandas as pd
import pytest

from brorl_lib.core import precision
from brorl_lib.core.table_files import save_table
from brorl_lib.figures.plotting import save_figure
from brorl_lib.paper import dynamic_sampling as ds
from brorl_lib.theory import plots as theory_plots
from brorl_lib.theory import report as tr


def nudged(values: np.ndarray, ulps: int, seed: int = 0) -> np.ndarray:
    """Each nonzero value moved by up to ``ulps`` units in its last place, up or down at random. An exact 0
    stays 0: a last-bit difference is relative (a value near 0 made by cancellation is a declared column)."""
    rng = np.random.default_rng(seed)
    out = np.array(values, dtype=float)
    for _ in range(ulps):
        step = rng.choice([-np.inf, np.inf], size=out.shape)
        move = (rng.random(out.shape) < 0.7) & (out != 0)
        out = np.where(move, np.nextafter(out, step), out)
    return out


def nudged_frame(frame: pd.DataFrame, ulps: int = 3) -> pd.DataFrame:
    out = frame.copy()
    for i, col in enumerate(frame.columns):
        if pd.api.types.is_float_dtype(frame[col]):
            out[col] = nudged(frame[col].to_numpy(), ulps, seed=i)
    return out


def files(saved) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in saved.files}


def test_rounding_is_exact_decimal_and_idempotent():
    x = np.array([0.1 + 0.2, 61.684999999999995, 1.1102230246251565e-16, -1e-300, np.nan, np.inf, 123456789012.3])
    r = precision.round_significant(x)
    assert r[0] == 0.3 and r[1] == 61.685 and r[2] == 1.110223025e-16 and r[3] == -1e-300
    assert np.isnan(r[4]) and r[5] == np.inf and r[6] == 123456789000.0
    assert np.array_equal(precision.round_significant(r), r, equal_nan=True)
    assert precision.round_decimals(np.array([-3e-17, 2.5e-11, 6.27561875795e-05]), 10).tolist() == [
        0.0,
        0.0,
        6.27562e-05,
    ]
    assert str(precision.round_decimals(-1e-17, 10)) == "0.0"  # never "-0.0"


def test_declared_rules_round_noise_away():
    frame = pd.DataFrame(
        {"rel_err": [3.3e-16, 6.27561875795e-05], "signed": [1.234567890123, -2.0e-16], "v": [1.0, 2.0]}
    )
    precision.declare(frame, decimals={"rel_err": 10}, scaled=["signed"])
    out = precision.rounded(frame)
    assert out["rel_err"].tolist() == [0.0, 6.27562e-05]
    assert out["signed"].tolist() == [1.23456789, 0.0]  # 10 digits of the largest value: the noise near 0 is gone
    with pytest.raises(ValueError, match=r"columns \['nope'\] are not in the frame"):
        precision.declare(frame, decimals={"nope": 3})


def test_figure_and_table_bytes_survive_last_bit_noise(out_dir):
    cfg = tr.TheoryConfig(n_instances=40, vocab_sizes=[10, 1000], rollout_sizes=[1, 16])
    checks = tr.theorem1_checks(cfg, progress=False)
    study = tr.step_size_study(cfg)
    worst = tr.worst_errors(checks)
    made = []
    for noise in (0, 3):
        ch = precision.declare(nudged_frame(checks, noise), decimals=dict.fromkeys(tr.REL_ERRORS, 10))
        st = precision.declare(nudged_frame(study, noise), decimals={"rel_gap": tr.STUDY_DECIMALS})
        wo = precision.declare(nudged_frame(worst, noise), decimals=dict.fromkeys(tr.REL_ERRORS, 10))
        if noise:
            assert not ch.equals(checks)  # the inputs really differ
        fig = theory_plots.theorem1_check(ch, st)
        figure = files(save_figure(fig, "check", provenance="reproduced", data=ch, caption="c"))
        table = files(save_table(wo, "worst", provenance="reproduced", caption="w"))
        made.append({**figure, **table})
    assert made[0] == made[1]
    assert set(made[0]) == {"check.pdf", "check.png", "check.csv", "worst.md", "worst.tex", "worst.csv"}


def test_sign_map_bytes_survive_last_bit_noise(out_dir):
    cfg = tr.TheoryConfig()
    grid, points = tr.sign_map(cfg, tr.example_batch(cfg)[0])
    made = []
    for noise in (0, 4):
        g = precision.declare(nudged_frame(grid, noise), scaled=["u_diff", "scaled_delta_q"])
        fig = theory_plots.sign_map(g, nudged_frame(points, noise))
        made.append(files(save_figure(fig, "sign", provenance="reproduced", data=g, caption="s")))
    assert made[0] == made[1]


def test_beta_fit_is_the_same_from_inputs_a_few_ulps_apart():
    rates = {16: 0.41, 512: 0.62}
    fits = set()
    for k in (0, 2):
        a, b, miss = ds.fit_beta({n: float(nudged(np.array([r]), k, seed=n)[0]) for n, r in rates.items()})
        fits.add((a, b, float(precision.round_significant(miss))))
    assert len(fits) == 1
    assert ds.expected_pass_rate(0.3, 0.7, [1])[0] == 0.0  # one rollout is never kept: exactly 0, not round-off
