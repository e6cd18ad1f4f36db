"""The one-node smoke profile (recipes/brorl/smoke/): the paper's batch on one node, short, listed delta."""

from __future__ import annotations

import pytest

from brorl_lib.verl_recipe import configs, launch, logs, record, smoke
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


def test_smoke_profile_refuses_more_than_one_node_before_any_work():
    with pytest.raises(ValueError, match=r"trainer\.nnodes=2 is not allowed"):
        smoke.SmokeSettings(nnodes=2)
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
