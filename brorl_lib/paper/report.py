"""The computations behind notebooks/03_paper_tables.ipynb."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from brorl_lib.core.claims import Claim
from brorl_lib.core.params import NotebookConfig, param
from brorl_lib.facts import reported as paper
from brorl_lib.facts.arms import paper_arms
from brorl_lib.paper import dynamic_sampling as ds
from brorl_lib.paper import roofline

# Column headers as printed in the paper.
HEADERS = {
    "method": "Method",
    "n_rollouts": "N",
    "prompts_per_step": "B",
    "steps": "Steps",
    "samples_k": "Samples (k)",
    "time_h": "Time (h)",
    "math_score": "Math Score",
    "code_score": "Code Score",
    "reasoning_gym_score": "Reasoning Gym Score",
    "dynamic_sampling_pass_rate_pct": "Dynamic Sampling Pass Rate (%)",
    "generation_throughput_samples_per_s": "Generation Throughput (samples/s)",
    "aime24": "AIME24",
    "aime25": "AIME25",
    "amc": "AMC",
    "math": "Math",
    "minerva": "Minerva",
    "olympiad_bench": "Olympiad Bench",
    "math_avg": "Math Avg.",
    "apps": "apps",
    "codecontests": "codecontests",
    "codeforces": "codeforces",
    "taco": "taco",
    "code_avg": "Code Avg.",
    "rg_avg": "Avg.",
}
TABLES = {
    "table1_efficiency": "Table 1: efficiency and performance (Samples and Time on top of the 3000-step baseline)",
    "table2_efficiency": "Table 2: algorithmic and hardware efficiency",
    "table3_math": "Table 3: math pass@1",
    "table4_code": "Table 4: code pass@1",
    "table5_reasoning_gym": "Table 5: Reasoning Gym scores per category",
}
SCORE_COLUMNS = ["math_score", "code_score", "reasoning_gym_score"]  # Table 1's domains, as in the blog
BLOG_SOURCE = "reported (blog)"
PAPER_SOURCE = "reported (paper, Table 1)"
DIFFERENCE_SOURCE = "difference (blog - paper)"
ROLLOUT_GRID = np.unique(np.round(np.geomspace(1, 4096, 60)).astype(int))
RESPONSE_GRID = np.array([256, 512, 1024, 2048, 4096, 8192, 16384])


@dataclass(frozen=True)
class PaperTablesConfig(NotebookConfig):
    """Notebook 03's parameters. Upper bounds are our choice, far beyond any GPU or run of the paper; none of
    them sizes an array (the roofline is closed-form), so they only keep the inputs physical."""

    prompt_len: int = param(
        1024, "prompt tokens per rollout (unstated; our choice)", unit="tokens", low=0, high=1_000_000
    )
    response_len: int = param(
        4096,
        "mean response tokens (unstated; our choice; ProRL context 8k, BroRL 16k)",
        unit="tokens",
        low=1,
        high=1_000_000,
    )
    gpus: int = param(64, "GPUs sharing the generation (paper: 64 H100)", low=1, high=100_000)
    peak_tflops: float = param(
        989.4,
        "dense BF16 tensor-core rate per GPU (H100 SXM datasheet)",
        unit="TFLOP/s",
        low=0.0,
        low_open=True,
        high=1e6,
    )
    bandwidth_tbs: float = param(
        3.35, "HBM bandwidth per GPU (H100 SXM datasheet)", unit="TB/s", low=0.0, low_open=True, high=1e4
    )
    memory_gb: float = param(80.0, "GPU memory (H100 SXM)", unit="GB", low=0.0, low_open=True, high=1e5)
    memory_utilization: float = param(
        0.9, "share of memory the engine uses for weights and KV cache", low=0.01, high=1.0
    )
    max_rollouts: int = param(4096, "largest N on the pass-rate curves", low=2, high=1_000_000)
    ttest_pairs: int = param(10000, 'pairs in the t-test (paper: "over 10,000 data points")', low=2, high=1_000_000_000)

    def hardware(self) -> roofline.Hardware:
        return roofline.Hardware(
            self.peak_tflops * 1e12, self.bandwidth_tbs * 1e12, self.memory_gb * 1e9, self.memory_utilization
        )


def paper_layout(name: str) -> pd.DataFrame:
    """A reported table with the paper's headers (the Reasoning Gym categories keep their names)."""
    return paper.load(name).rename(columns=HEADERS)


def blog_vs_paper() -> pd.DataFrame:
    """The blog's headline scores of the released BroRL model beside the paper's longest BroRL row of Table 1.

    Three rows, each labelled in ``source``: the blog's ("reported (blog)", quoted via a third-party summary;
    ``facts.reported.blog_headline_scores``), the paper's BroRL row with the most steps ("reported (paper,
    Table 1)", +191 steps in v1), and their difference per domain ("difference (blog - paper)", in score
    points, rounded to the 2 decimals both sides print). Columns: source, method, steps, and Table 1's three
    score columns. Table 1 itself is untouched: the blog's row never joins it.
    """
    blog = paper.blog_headline_scores().iloc[0]
    arms = paper.table1_arms()
    bro = arms[arms["method"] == "BroRL"]
    last = bro.loc[bro["steps_added"].idxmax()]
    scores = {side: {c: float(row[c]) for c in SCORE_COLUMNS} for side, row in (("blog", blog), ("paper", last))}
    difference = {c: round(scores["blog"][c] - scores["paper"][c], 2) for c in SCORE_COLUMNS}
    rows = [
        {"source": BLOG_SOURCE, "method": blog["model"], "steps": None, **scores["blog"]},
        {"source": PAPER_SOURCE, "method": last["method"], "steps": last["steps"], **scores["paper"]},
        {"source": DIFFERENCE_SOURCE, "method": None, "steps": None, **difference},
    ]
    return pd.DataFrame(rows, columns=["source", "method", "steps", *SCORE_COLUMNS])


PASS_RATE_BASIS = "two models of the pass rate fitted to Table 2's reported pass rates at N=16 and 512"
THROUGHPUT_BASIS = "a roofline model of decoding on the paper's H100s, set beside Table 2's reported throughput ratio"
BLOG_BASIS = "the authors' NVIDIA blog (19 Nov 2025, via a third-party summary), beside the paper's Table 1"


def pass_rate_curves(cfg: PaperTablesConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Expected dynamic-sampling pass rate against N under the two fitted models, and the fits."""
    rates = paper.table2_pass_rates()
    a, b, miss = ds.fit_beta(rates)
    share = ds.minimal_degenerate_share(rates)
    fits = [{"model": "Beta", "a": a, "b": b, "degenerate_share": 0.0, "worst_miss": miss}]
    if share is not None:
        a2, b2, miss2 = ds.fit_beta(rates, share)
        fits.append(
            {"model": "Beta + degenerate share", "a": a2, "b": b2, "degenerate_share": share, "worst_miss": miss2}
        )
    ns = ROLLOUT_GRID[ROLLOUT_GRID <= cfg.max_rollouts]
    curves = pd.concat(
        [
            pd.DataFrame(
                {
                    "model": f["model"],
                    "N": ns,
                    "pass_rate": ds.expected_pass_rate(f["a"], f["b"], ns, f["degenerate_share"]),
                }
            )
            for f in fits
        ],
        ignore_index=True,
    )
    kept = curves["N"] > 1  # N = 1 never keeps anything (its rate is 0): no wasted-per-kept value
    curves["wasted_per_kept"] = np.nan
    curves.loc[kept, "wasted_per_kept"] = ds.wasted_per_kept(curves.loc[kept, "pass_rate"])
    return curves, pd.DataFrame(fits)


def throughput_table(cfg: PaperTablesConfig) -> pd.DataFrame:
    """Predicted samples/s of both arms and their ratio, over response lengths, with and without prefix sharing."""
    model, hw = roofline.ModelShape(), cfg.hardware()
    rows = []
    for resp in sorted(set(RESPONSE_GRID.tolist()) | {cfg.response_len}):
        for shared in (False, True):
            pro, bro = (
                roofline.arm_throughput(arm, cfg.gpus, model, hw, cfg.prompt_len, resp, shared) for arm in paper_arms()
            )
            rows.append(
                {
                    "response_len": resp,
                    "shared_prefix": shared,
                    "prorl_concurrency": pro["concurrency_per_gpu"],
                    "brorl_concurrency": bro["concurrency_per_gpu"],
                    "prorl_intensity": pro["intensity"],
                    "brorl_intensity": bro["intensity"],
                    "prorl_samples_per_s": pro["samples_per_s"],
                    "brorl_samples_per_s": bro["samples_per_s"],
                    "ratio": bro["samples_per_s"] / pro["samples_per_s"],
                }
            )
    return pd.DataFrame(rows)


def roofline_points(cfg: PaperTablesConfig) -> pd.DataFrame:
    """Where each arm's decode step sits on the roofline at the configured lengths."""
    model, hw = roofline.ModelShape(), cfg.hardware()
    rows = []
    for shared in (False, True):
        for arm in paper_arms():
            r = roofline.arm_throughput(arm, cfg.gpus, model, hw, cfg.prompt_len, cfg.response_len, shared)
            rows.append({**r, "achieved_flops": r["flops"] / r["time_s"]})
    return pd.DataFrame(rows)


ROUNDING = 0.01  # points: the paper prints scores to two decimals, so a recomputed mean this close agrees


def averages_claim(checks: pd.DataFrame) -> Claim:
    """The results-at-a-glance row of Table 1's domain scores against the means of the per-benchmark tables
    (``facts.reported.domain_average_checks``)."""
    gaps = {d: (checks[f"{d}_recomputed"] - checks[f"{d}_reported"]).tolist() for d in ("math", "code")}
    gaps["rg"] = (checks["rg_category_mean"] - checks["rg_reported"]).tolist()
    close = max(abs(g) for d in ("math", "code") for g in gaps[d])
    rg = gaps["rg"]
    math_code = f"{'yes' if close <= ROUNDING else 'no'}, within {close:.2g} points"
    if max(abs(g) for g in rg) <= ROUNDING:
        reasoning = f"yes, within {max(abs(g) for g in rg):.2g} points"
    else:
        spread = f"{min(rg):+.2f} to {max(rg):+.2f}"
        reasoning = f"no, Table 5's category mean differs from Table 1's score by {spread} points"
    return Claim(
        claim="Table 1's domain scores are the means of Tables 3–5",
        verdict=f"Math and Code: {math_code}; Reasoning Gym: {reasoning}",
        caveat="arithmetic on the numbers the paper reports; nothing is trained again",
        figure="paper_average_checks",
    )
