"""The smoke profile (recipes/brorl/smoke/): the paper's batch at full length on two nodes, BroRL first, a listed
delta, and what its report reads back from the logs."""

from __future__ import annotations

import json

import pytest

from brorl_lib.verl_recipe import configs, launch, logs, record, smoke, smoke_metrics
from brorl_lib.verl_recipe.cpu import profile


@pytest.mark.parametrize("arm", ["prorl", "brorl"])
def test_smoke_profile_is_the_committed_arm_plus_exactly_the_listed_delta(arm):
    committed = (record.RECORD_DIR / arm / "overrides.txt").read_text().splitlines()
    smoked = (record.RECORD_DIR / "smoke" / arm / "overrides.txt").read_text().splitlines()
    before = {profile.override_key(o): o for o in committed}
    after = {profile.override_key(o): o for o in smoked}
    delta = smoke.delta()
    assert set(after) == set(before)  # nothing added, nothing dropped
    assert {k for k in after if before[k] != after[k]} == {k for k, (v, _) in delta.items() if before[k] != f"{k}={v}"}
    assert {group for _, group in delta.values()} == set(smoke.DELTA_GROUPS)
    # the paper's batch is kept: N, prompts per step, mini-batches, learning rate, storage rule, tokenizer path
    for key in ("actor_rollout_ref.rollout.n", "data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size",
                "actor_rollout_ref.actor.optim.lr", "transfer_queue.backend.SimpleStorage.total_storage_size",
                "actor_rollout_ref.model.use_remove_padding", "trainer.v1.sampler.custom_sampler.name"):  # fmt: skip
        assert before[key] == after[key]
    assert 'STOPS="2"' in (record.RECORD_DIR / "smoke" / arm / "launch.sh").read_text()
    profile_sh = (record.RECORD_DIR / "smoke" / "profile.sh").read_text()
    assert f"export VERL_USE_EXTERNAL_MODULES={launch.FALLBACK_MODULE}" in profile_sh


def test_smoke_profile_is_two_nodes_at_the_papers_full_length_brorl_first():
    for arm in smoke.ORDER:
        cfg = configs.compose((record.RECORD_DIR / "smoke" / arm / "overrides.txt").read_text().splitlines())
        assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (2, 8)
        assert cfg.data.max_response_length == configs.MAX_RESPONSE_LENGTH == 16384  # the paper profile's
        assert cfg.actor_rollout_ref.actor.ppo_max_token_len_per_gpu == configs.TOKENS_PER_GPU  # 36,864-token batches
        assert "two nodes of 8 GPUs" in (record.RECORD_DIR / "smoke" / arm / "launch.sh").read_text()
    assert smoke.ORDER == ("brorl", "prorl")


def test_smoke_profile_refuses_one_node_before_any_work():
    with pytest.raises(ValueError, match=r"trainer\.nnodes=1 is not allowed in the smoke profile: it covers"):
        smoke.SmokeSettings(nnodes=1)
    with pytest.raises(ValueError, match="trainer.total_training_steps"):
        smoke.SmokeSettings(steps=1)  # a kill after step 1 needs a step 2 to resume to


def test_smoke_report_reads_seconds_per_step_from_verls_logs(tmp_path, monkeypatch):
    arm_dir = tmp_path / "brorl"
    (arm_dir / "logs").mkdir(parents=True)
    (arm_dir / "config.yaml").write_text(configs.to_yaml(configs.compose(record.profile_arms()["cpu/brorl"][1])))
    lines = [
        '{"step": 0, "data": {"val-core/math.x/acc/mean@16": 0.5}}',
        '{"step": 1, "data": {"timing_s/step": 100.0}}',
        '{"step": 2, "data": {"timing_s/step": 300.0}}',
    ]
    (arm_dir / "logs" / "segment_000.jsonl").write_text("\n".join(lines) + "\n")
    assert smoke.seconds_per_step(arm_dir) == 200.0
    text = smoke.report("brorl", arm_dir, smoke.SmokeSettings())
    steps = configs.table1_stops("brorl")[-1]
    assert "200.0 s per step" in text and f"{steps} steps: {200 * steps / 3600:.1f} h here" in text
    assert logs.read_run(arm_dir).arm == "brorl"


def test_smoke_report_reads_memory_samples_rounds_and_step0_validation_from_the_logs(tmp_path):
    arm_dir = tmp_path / "brorl"
    (arm_dir / "logs").mkdir(parents=True)
    step = {"timing_s/step": 100.0, "timing_s/gen": 60.0, "actor/perf/max_memory_reserved_gb": 70.5}
    step |= {smoke_metrics.RSS_KEY: 40.0, smoke_metrics.RESIDENT_KEY: 98304.0, smoke_metrics.ROUNDS_KEY: 1.5}
    lines = [
        {"step": 0, "data": {"val-core/math.x/acc/mean@16": 0.25, "val-core/rg.y/acc/mean@16": 0.5}},
        {"step": 1, "data": step},
        {"step": 2, "data": step | {smoke_metrics.RSS_KEY: 52.0, smoke_metrics.ROUNDS_KEY: 1.0}},
    ]
    (arm_dir / "logs" / "segment_000.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    got = smoke_metrics.measures(arm_dir)
    assert got["peak_gpu_memory_gb"] == 70.5 and got["task_runner_rss_gb"] == 52.0 and got["gen_rounds"] == 1.5
    assert got["peak_resident_samples"] == 98304 and got["filtered_samples"] is None
    assert got["val-core/math.x/acc/mean@16"] == 0.25 and got["val-core/rg.y/acc/mean@16"] == 0.5
    text = smoke_metrics.format_measures(got)
    assert "task_runner_rss_gb: 52  (brorl/task_runner/rss_gb, the recipe's sampler)" in text
    assert "filtered_samples: not logged" in text and "step 0 val-core/rg.y/acc/mean@16: 0.5" in text
    assert "not collected, reward time alone:" in text
