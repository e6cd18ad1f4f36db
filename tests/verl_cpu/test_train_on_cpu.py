"""verl's own trainer runs the committed recipe on this CPU: both arms, resume after a kill, the round cap.

These launch ``recipes/brorl/cpu/<arm>/launch.sh`` (``python -m verl.trainer.main_ppo`` with the committed
arm's overrides plus the CPU delta) at the smallest size that still shows each point, and check verl's own
logs through the project's reader. Two to three minutes per launch on 2 cores (`make verl-test`). The tiny
model carries the paper's tokenizer family (DeepSeek-R1-distill, ``model_type: qwen2``), so every launch goes
through the tokenizer fallback; the data include math rows and one row per scorer (``reward_rows``); ProRL
keeps the recipe's four PPO mini-batches and BroRL has two, so each arm's later mini-batches are off-policy.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import sys
import time

import pytest
from hang_limits import HANG_S

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.models import deepseek_tokenizer, tiny
from brorl_lib.verl_recipe import configs, logs, processes, record
from brorl_lib.verl_recipe.cpu import profile, reward_rows, run, tiny_model

# Ray's dashboard is not under test: without it Ray 2.60 skips the dashboard's eight head modules (processes
# forked at start-up; its minimal dashboard process still runs), on 2 shared cores
NO_DASHBOARD = ["+ray_kwargs.ray_init.include_dashboard=false"]
SHORT = ["trainer.total_training_steps=2", "trainer.save_freq=1", "trainer.test_freq=2"]
NO_FIRST_VALIDATION = [*SHORT, "trainer.val_before_train=false"]  # where no check reads step 0's validation
# Test setting (ours): a clip range of 0.001 each side, which the later, off-policy mini-batches' ratios leave at the
# recipe's learning rate, so verl's actor must report clipped tokens (tests/test_verl_clipping.py shows the recipe's
# own 0.2 / 0.28 reaching the same loss)
TIGHT_CLIP = ["actor_rollout_ref.actor.clip_ratio_low=0.001", "actor_rollout_ref.actor.clip_ratio_high=0.001"]


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    work = tmp_path_factory.mktemp("verl_cpu")
    p = run.Paths(work, work / "runs", work / "start_model")
    if (run.START_MODEL / "config.json").is_file():
        shutil.copytree(run.START_MODEL, p.model)
    run.prepare(p, train_per_task=32)  # warm-starts a model only when none is committed
    return p


def launch(arm, paths, extra, log_name):
    with open(paths.work / log_name, "wb") as log:
        return run.launch(arm, paths, [*extra, *NO_DASHBOARD], timeout_s=2 * HANG_S, log=log)


def trained(log: logs.RunLog):
    return log.steps[log.steps["kept_groups"] > 0].set_index("step")


def test_prorl_trains_and_resumes_after_a_kill(paths):
    with open(paths.work / "prorl-killed.log", "wb") as log:
        run.launch_and_kill(
            "prorl", paths, after_step=1, extra=[*NO_FIRST_VALIDATION, *NO_DASHBOARD], timeout_s=2 * HANG_S, log=log
        )
    assert run.latest_checkpoint(paths, "prorl") == 1
    status = launch("prorl", paths, [*SHORT, *TIGHT_CLIP], "prorl-resumed.log")
    assert status == 0, (paths.work / "prorl-resumed.log").read_text()[-3000:]
    assert run.latest_checkpoint(paths, "prorl") == 2
    log = logs.read_run(paths.runs / "prorl")
    assert log.segments == 2  # the killed launch and the resumed one, joined by the reader
    steps = trained(log)
    assert list(steps.index) == [1, 2]  # step 2 after the resume, nothing trained twice
    n, prompts = profile.CPU_ARMS["prorl"]
    assert (steps["kept_samples"] == n * prompts).all()  # the kept batch is the configured size
    assert (steps["train_score"] > 0).any()  # rewards from the project's reward function
    assert ((steps["grad_norm"] > 0) & steps["grad_norm"].map(math.isfinite)).all()  # gradients flow
    # the math rows were scored by the recipe's reward (Math-Verify's pool) inside verl's reward worker
    sources = {"reasoning_gym.family_relationships", "reasoning_gym.aiw", "math.arithmetic"}
    assert sources | {row.data_source for row in reward_rows.ROWS} <= set(log.validation["data_source"])
    # four PPO mini-batches: the later ones are off-policy, so the ratio leaves 1 and clipping is measured
    merged = logs.merge_segments(sorted((paths.runs / "prorl" / "logs").glob(logs.SEGMENT_GLOB)))
    assert all(merged[s]["actor/ppo_kl"] != 0 and math.isfinite(merged[s]["actor/pg_clipfrac"]) for s in (1, 2))
    assert merged[2]["actor/pg_clipfrac"] > 0  # the resumed step, under TIGHT_CLIP


# The order is the schedule: pytest-xdist gives each of two workers two tests in file order, so the cap's launch,
# which fails inside its first step, goes with the kill and resume (two launches), BroRL's step with the round
# cap's launch (make verl-test: 9 min 8 s in the order before, 7 min 59 s and 8 min 19 s in this one).


def test_a_transfer_queue_cap_below_the_steps_peak_fails_the_run(paths, tmp_path):
    n, prompts = profile.CPU_ARMS["prorl"]
    cap = n * prompts // 2  # below the kept batch alone; the recipe's rule (no cap) is what the other runs use
    assert "transfer_queue.backend.SimpleStorage.total_storage_size=null" in record.profile_arms()["cpu/prorl"][1]
    capped = run.Paths(tmp_path, tmp_path / "runs", paths.model)  # its own checkpoints and logs
    shutil.copytree(paths.data_dir, capped.data_dir)
    extra = ["trainer.total_training_steps=1", "trainer.val_before_train=false",
             f"transfer_queue.backend.SimpleStorage.total_storage_size={cap}"]  # fmt: skip
    status = launch("prorl", capped, extra, "capped.log")
    text = (tmp_path / "capped.log").read_text(errors="replace")
    assert status != 0 and run.latest_checkpoint(capped, "prorl") == 0
    assert f"Storage capacity exceeded: {cap} existing + 1 new > {cap}" in text


def test_brorl_trains_with_its_batch_and_learning_rate(paths):
    # one step: the second step, validation and the resume are the same code for both arms (the test above)
    extra = ["trainer.total_training_steps=1", "trainer.save_freq=1", "trainer.test_freq=-1",
             "trainer.val_before_train=false", *TIGHT_CLIP]  # fmt: skip
    started = time.time()
    assert launch("brorl", paths, extra, "brorl.log") == 0, (paths.work / "brorl.log").read_text()[-3000:]
    log = logs.read_run(paths.runs / "brorl")
    steps = trained(log)
    assert list(steps.index) == [1]
    assert run.latest_checkpoint(paths, "brorl") == 1
    n, prompts = profile.CPU_ARMS["brorl"]
    assert (steps["kept_samples"] == n * prompts).all()
    assert (steps["train_score"] > 0).any() and (steps["grad_norm"] > 0).all()
    arms = profile.cpu_arms(2)
    expected = configs.learning_rate(arms["brorl"], arms["prorl"])
    merged = logs.merge_segments(sorted((paths.runs / "brorl" / "logs").glob(logs.SEGMENT_GLOB)))
    assert float(merged[1]["actor/lr"]) == pytest.approx(expected)
    # two PPO mini-batches: the second is off-policy, the ratio leaves 1 and leaves TIGHT_CLIP's range
    assert merged[1]["actor/ppo_kl"] != 0 and merged[1]["actor/pg_clipfrac"] > 0
    board = REPO_ROOT / record.TENSORBOARD_ROOTS["cpu/"] / "brorl"  # verl's own TensorBoard logger, beside the JSONL
    assert any(f.stat().st_mtime >= started - 1 for f in board.glob("events.out.tfevents.*")), board


def test_a_run_whose_groups_are_all_filtered_stops_with_a_reason(paths, tmp_path):
    never = tmp_path / "never_scores"  # an untrained model: no answer in <answer> tags, reward 0 everywhere
    tok = deepseek_tokenizer.build_tokenizer()
    tiny.build_model(tiny_model.CPU_RUN_SHAPE, tok, seed=0).save_pretrained(never)
    deepseek_tokenizer.save_tokenizer(tok, never)
    blind = run.Paths(tmp_path, tmp_path / "runs", never)  # its own checkpoints: nothing to resume from
    run.prepare(blind, train_per_task=32)
    extra = ["trainer.total_training_steps=1", "trainer.val_before_train=false",
             "algorithm.filter_groups.max_num_gen_batches=2"]  # fmt: skip
    status = launch("prorl", blind, extra, "never.log")
    text = (tmp_path / "never.log").read_text(errors="replace")
    assert status != 0
    assert "DynamicSamplingExhausted" in text and "max_num_gen_batches=2" in text
    assert "pass rate on the training prompts" in text


def test_sigterm_ends_the_cpu_run_with_its_ray_cluster(tmp_path):
    # the real command and verl's trainer: SIGTERM once Ray's processes exist (raylet, gcs_server; Ray moves
    # some into process groups of their own) leaves no process carrying this test's marker
    from test_verl_processes import MARKER, command_line, stop_mid_run

    cmd = [sys.executable, "-m", "brorl_lib.verl_recipe.cpu.run", "--arms", "prorl", "--no-eval"]
    cmd += ["--work", str(tmp_path / "work"), "--runs", str(tmp_path / "runs")]

    def raylet_exists(marker: str) -> bool:
        return any("raylet" in command_line(p) for p in processes.marked(marker, MARKER))

    status, err = stop_mid_run(cmd, dict(os.environ), raylet_exists, timeout_s=HANG_S)
    assert status == 128 + signal.SIGTERM and "no process of it is left" in err
