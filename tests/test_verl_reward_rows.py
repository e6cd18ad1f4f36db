"""The CPU run's reward rows: each needs its scorer, and the committed run logs a positive reward for each.

The math and STEM rows' taught answers are rejected by verl's MATH scorer alone and accepted by Math-Verify, so
a committed validation reward above 0 on them is only possible if Math-Verify ran inside verl's reward worker;
the code and instruction rows' rewards come from verl's PRIME scorer and IFEval's checker the same way."""

import pandas as pd
import pytest

from brorl_lib.verl_recipe import data, logs
from brorl_lib.verl_recipe.cpu import reward_rows
from brorl_lib.verl_recipe.report import RUNS_DIR
from brorl_lib.verl_recipe.rewards import compute_score

COMMITTED = RUNS_DIR / "verl-cpu"


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    return reward_rows.frames(tmp_path_factory.mktemp("reward_rows"), repeats=3)


def test_rows_pass_through_the_converters_into_verls_schema(frames):
    train, val = frames
    data.check_schema(train, "train")
    data.check_schema(val, "val")
    sources = [row.data_source for row in reward_rows.ROWS]
    assert list(val["data_source"]) == sources and len(val) == len(reward_rows.ROWS)
    assert list(train["data_source"].value_counts().reindex(sources)) == [3] * len(sources)
    assert set(val["data_source"].map(lambda s: s.split(".")[0])) == {"math", "stem", "code", "instruction"}


@pytest.mark.parametrize("row", reward_rows.ROWS, ids=lambda r: r.data_source)
def test_each_taught_response_earns_full_reward_and_a_wrong_one_none(frames, row):
    _, val = frames
    truth = val.set_index("data_source").loc[row.data_source, "reward_model"]["ground_truth"]
    assert compute_score(row.data_source, row.response, truth, math_verify="inline") == {"score": 1.0, "acc": 1.0}
    assert compute_score(row.data_source, "no answer", truth, math_verify="inline")["score"] == 0.0
    if row.family in ("math", "stem"):  # verl's string scorer alone rejects it: the reward needs Math-Verify
        assert compute_score(row.data_source, row.response, truth, math_verify="off")["score"] == 0.0


def validation_acc(arm: str) -> pd.DataFrame:
    v = logs.read_run(COMMITTED / arm).validation
    return v[v["var"] == "acc"].pivot_table(index="step", columns="data_source", values="value")


@pytest.mark.parametrize("arm", ["prorl", "brorl"])
def test_the_committed_cpu_run_logs_a_positive_reward_for_every_reward_row(arm):
    acc = validation_acc(arm)
    for row in reward_rows.ROWS:
        assert row.data_source in acc.columns, f"{arm}: no validation of {row.data_source}"
        assert acc[row.data_source].max() > 0, f"{arm}: {row.data_source} scored 0 at every validation"
