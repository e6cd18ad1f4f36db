"""The paper's numbers as data, and the models built on them."""

import shutil
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest

from brorl_lib.core import stats
from brorl_lib.facts import reported as paper
from brorl_lib.facts.arms import Arm
from brorl_lib.paper import dynamic_sampling as ds
from brorl_lib.paper import report as paper_report
from brorl_lib.paper import roofline


def test_checksums_and_schemas():
    paper.verify_checksums()
    for name, schema in paper.SCHEMAS.items():
        df = paper.load(name)
        assert list(df.columns) == list(schema)
        for col, kind in schema.items():
            if kind == "float":
                assert pd.api.types.is_float_dtype(df[col]), (name, col)
            elif kind == "int":
                assert pd.api.types.is_integer_dtype(df[col]), (name, col)
    assert len(paper.load("table1_efficiency")) == 6 and len(paper.load("figure4_tasks")) == 9


def test_a_changed_or_broken_file_is_caught(tmp_path):
    data = tmp_path / "paper"
    shutil.copytree(paper.DATA_DIR, data)
    t3 = data / "table3_math.csv"
    t3.write_text(t3.read_text().replace("49.58", "49.59"))
    with pytest.raises(ValueError, match=r"\['table3_math.csv'\] differ from SHA256SUMS"):
        paper.verify_checksums(data)
    t3.write_text(t3.read_text().replace("aime24,", ""))
    with pytest.raises(ValueError, match="missing columns"):
        paper.load("table3_math", data)
    with pytest.raises(ValueError, match="unknown table"):
        paper.load("table9")


def test_averages_match_the_paper_rounding_except_reasoning_gym():
    checks = paper.domain_average_checks()
    assert (checks["math_reported"] - checks["math_recomputed"]).abs().max() <= 0.01
    assert (checks["code_reported"] - checks["code_recomputed"]).abs().max().round(9) <= 0.005
    assert checks["rg_gap"].between(0.6, 1.51).all()  # docs/reading-the-paper.md#consistency-checks: +0.61 to +1.51


def test_sample_accounting_reproduces_table2_pass_rates():
    acc = paper.sample_accounting().groupby("method")["implied_pass_rate"].mean()
    assert acc["ProRL"] == pytest.approx(0.42, abs=0.002) and acc["BroRL"] == pytest.approx(0.625, abs=0.002)
    assert paper.steps_added(pd.Series(["3000", "+225"])).tolist() == [0, 225]
    model = paper.samples_model({"ProRL": 0.41, "BroRL": 0.62})
    assert model["ratio"].between(0.97, 1.0).all()


def test_side_by_side_puts_reproduced_next_to_reported():
    reported = pd.DataFrame({"method": ["A", "B"], "score": [1.0, 2.0], "time": [3.0, 4.0]})
    reproduced = pd.DataFrame({"method": ["B", "C"], "score": [2.5, 9.0]})
    out = paper.side_by_side(reported, reproduced, ["method"])
    assert list(out.columns) == ["method", "score (reported)", "score (reproduced)", "time (reported)"]
    assert out.set_index("method").loc["B", "score (reproduced)"] == 2.5
    assert np.isnan(out.set_index("method").loc["C", "score (reported)"])
    assert list(paper.side_by_side(reported, None, ["method"]).columns) == [
        "method",
        "score (reported)",
        "time (reported)",
    ]
    with pytest.raises(ValueError, match="not in the reported table"):
        paper.side_by_side(reported, reproduced.assign(extra=1), ["method"])


def test_keep_probability_and_beta_expectation():
    assert ds.keep_probability(0.5, 2) == pytest.approx(0.5)
    assert ds.keep_probability(0.0, 16) == 0 and ds.keep_probability(1.0, 16) == 0
    # Monte Carlo check of the closed form
    rng = np.random.default_rng(0)
    p = rng.beta(0.3, 0.7, size=400_000)
    assert ds.expected_pass_rate(0.3, 0.7, 16) == pytest.approx(ds.keep_probability(p, 16).mean(), abs=2e-3)
    assert ds.expected_pass_rate(0.3, 0.7, 16) == pytest.approx(ds.expected_pass_rate(0.7, 0.3, 16))  # p <-> 1-p


def test_beta_fits():
    rates = dict(zip([16, 512], ds.expected_pass_rate(0.3, 0.8, [16, 512])))  # made by a Beta: recovered
    a, b, miss = ds.fit_beta(rates)
    assert miss < 1e-8 and a <= b  # rates reproduced; (a, b) need not be (0.3, 0.8): two rates do not fix them
    assert ds.expected_pass_rate(a, b, [16, 512]) == pytest.approx(list(rates.values()), abs=1e-8)
    rates = paper.table2_pass_rates()
    assert ds.fit_beta(rates)[2] > 0.01  # the reported pair is not reachable by one Beta
    share = ds.minimal_degenerate_share(rates)
    assert share is not None and 0.1 < share < 0.3
    assert ds.fit_beta(rates, share)[2] <= 1e-4


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ds.keep_probability(0.5, 0), "n_rollouts"),
        (lambda: ds.keep_probability(1.5, 4), "success rate"),
        (lambda: ds.fit_beta({16: 0.41, 512: 1.2}), "pass rate 1.2"),
        (lambda: ds.fit_beta({16: 0.41}), "two or more"),
        (lambda: ds.wasted_per_kept(0.0), "pass_rate"),
    ],
)
def test_bad_dynamic_sampling_inputs(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_roofline_by_hand():
    model, hw = roofline.ModelShape(), roofline.Hardware()
    assert model.head_dim == 128
    assert model.kv_bytes_per_token() == 2 * 28 * 2 * 128 * 2
    one = roofline.decode_step(model, hw, 1, 1, 0, 100, shared_prefix=False)
    weights = model.matmul_params() * 2
    assert one["bytes"] == weights + 100 * model.kv_bytes_per_token()
    assert one["memory_bound"] and one["time_s"] == pytest.approx(one["bytes"] / hw.bandwidth)
    many = roofline.decode_step(model, hw, 512, 512, 1000, 10, shared_prefix=True)
    unshared = roofline.decode_step(model, hw, 512, 512, 1000, 10, shared_prefix=False)
    assert many["bytes"] < unshared["bytes"] and many["intensity"] > one["intensity"]
    assert hw.ridge == pytest.approx(989.4 / 3.35)


def test_arm_throughput_and_concurrency_cap():
    model, hw = roofline.ModelShape(), roofline.Hardware()
    short = roofline.arm_throughput(Arm("BroRL", 512, 128), 64, model, hw, 1024, 256, True)
    long = roofline.arm_throughput(Arm("BroRL", 512, 128), 64, model, hw, 1024, 16384, True)
    assert short["concurrency_per_gpu"] == 1024 and long["concurrency_per_gpu"] < 1024  # KV memory binds
    assert short["samples_per_s"] > long["samples_per_s"]
    with pytest.raises(ValueError, match="sequences"):
        roofline.decode_step(model, hw, 0, 1, 0, 1, False)


def test_t_test_from_reported_and_on_data():
    p = stats.p_value_from_t(4.84, 10_000)
    assert p["p_normal"] == pytest.approx(6.49e-7, rel=0.01) and p["p_student_t"] == pytest.approx(6.59e-7, rel=0.01)
    rng = np.random.default_rng(1)
    control = rng.random(500)
    res = stats.paired_test(control + 0.05 + rng.normal(0, 0.1, 500), control)
    assert res["mean_difference"] == pytest.approx(0.05, abs=0.02) and res["p"] < 1e-6 and res["n"] == 500
    with pytest.raises(ValueError, match="equal length"):
        stats.paired_test([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="alternative"):
        stats.paired_test([1, 2], [1, 2], alternative="bigger")


def test_report_config_and_outputs():
    good = asdict(paper_report.PaperTablesConfig())  # the defaults: the paper's setup and our choices
    cfg = paper_report.PaperTablesConfig(**good)
    table = paper_report.throughput_table(cfg)
    assert set(table["response_len"]) >= {256, 4096, 16384} and (table["ratio"] >= 1).all()
    points = paper.figure1_data()
    assert points.groupby(["method", "domain"]).size().tolist() == [4, 4, 4, 3, 3, 3]
    for field, value in (("response_len", 0), ("memory_utilization", 1.5), ("gpus", 0), ("max_rollouts", 1)):
        with pytest.raises(ValueError, match=field):
            paper_report.PaperTablesConfig(**{**good, field: value})


def test_every_data_file_is_under_checksum():
    listed = {line.split(maxsplit=1)[1] for line in (paper.DATA_DIR / "SHA256SUMS").read_text().splitlines()}
    assert {p.name for p in paper.DATA_DIR.glob("*.csv")} == listed


def test_blog_headline_scores_are_their_own_source():
    blog = paper.blog_headline_scores()
    assert len(blog) == 1 and list(blog.columns) == list(paper.SCHEMAS["blog_headline_scores"])
    row = blog.iloc[0]
    assert (row["math_score"], row["code_score"], row["reasoning_gym_score"]) == (63.66, 56.64, 63.40)
    assert row["source_url"].startswith("https://developer.nvidia.com/blog/") and "third-party" in row["note"]
    assert "brorl" in row["checkpoint"] and "not identical" in row["note"]
    # the blog's row is never one of Table 1's
    assert not paper.load("table1_efficiency")["math_score"].isin(blog["math_score"]).any()


def test_a_blog_file_with_another_row_is_refused(tmp_path):
    data = tmp_path / "paper"
    shutil.copytree(paper.DATA_DIR, data)
    blog = data / "blog_headline_scores.csv"
    lines = blog.read_text().splitlines()
    blog.write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(ValueError, match="expected one row"):
        paper.blog_headline_scores(data)
    with pytest.raises(ValueError, match=r"\['blog_headline_scores.csv'\] differ from SHA256SUMS"):
        paper.verify_checksums(data)


def test_blog_vs_paper_labels_each_row_and_subtracts_per_domain():
    table = paper_report.blog_vs_paper()
    assert table["source"].tolist() == ["reported (blog)", "reported (paper, Table 1)", "difference (blog - paper)"]
    assert list(table.columns) == ["source", "method", "steps", *paper_report.SCORE_COLUMNS]
    rows = table.set_index("source")
    paper_row = rows.loc["reported (paper, Table 1)"]
    assert (paper_row["method"], paper_row["steps"]) == ("BroRL", "+191")
    assert paper_row[paper_report.SCORE_COLUMNS].tolist() == [63.03, 54.20, 63.09]
    assert rows.loc["reported (blog)", paper_report.SCORE_COLUMNS].tolist() == [63.66, 56.64, 63.40]
    difference = rows.loc["difference (blog - paper)", paper_report.SCORE_COLUMNS].astype(float).round(2)
    assert difference.tolist() == [0.63, 2.44, 0.31]
    # Table 1 keeps its six rows, none of them the blog's
    t1 = paper.load("table1_efficiency")
    assert len(t1) == 6 and "reported (blog)" not in t1.to_string()
