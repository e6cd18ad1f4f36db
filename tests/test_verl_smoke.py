"""The smoke profile (recipes/brorl/smoke/): the paper's batch at full length on two nodes, BroRL first, a listed
delta, and what its report reads back from the logs."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
import yaml
from hang_limits import HANG_S

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.facts import reported as paper
from brorl_lib.verl_recipe import configs, data, launch, logs, record, report, smoke, smoke_gates, smoke_metrics
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


# --- time limits, outcomes per arm, a re-run over an earlier run, the report's gates ---

# A stand-in for verl (launch_arm.sh runs it as `$PYTHON -m verl.trainer.main_ppo OVERRIDES`): it trains from the
# arm's checkpoint (or from step 0 with STANDIN_RESTART set), saves each step's checkpoint and logs the step as verl's
# file logger does, and waits after step 1 of a launch that started at step 0 (where the smoke kills it).
STAND_IN = """#!{python}
import json, os, sys, time
from pathlib import Path
args = dict(a.split("=", 1) for a in sys.argv[3:] if "=" in a)
ckpt = Path(args["trainer.default_local_dir"].strip("'"))
marker = ckpt / "latest_checkpointed_iteration.txt"
done = int(marker.read_text()) if marker.is_file() else 0
metrics = {{**json.loads(os.environ["STANDIN_METRICS"]), "timing_s/step": float(os.environ["STANDIN_STEP_S"])}}
first = 1 if os.environ.get("STANDIN_RESTART") else done + 1
with open(os.environ["VERL_FILE_LOGGER_PATH"], "a") as log:
    for step in range(first, int(args["trainer.total_training_steps"]) + 1):
        ckpt.mkdir(parents=True, exist_ok=True)
        marker.write_text(str(step))
        log.write(json.dumps({{"step": step, "data": metrics}}) + "\\n")
        log.flush()
        if done == 0 and step == 1:
            time.sleep(600)
"""


def in_range_step(arm: str) -> dict[str, float]:
    """One training step's metrics inside every gate of ``arm`` (kept fraction = (kept + 0) / (kept + evicted))."""
    n, prompts = configs.PAPER_ARMS[arm]
    rate = paper.table2_pass_rates()[n]
    return {
        "timing_s/step": smoke.step_hours(arm) * 3600,
        "actor/perf/max_memory_reserved_gb": 40.0,
        smoke_metrics.ROUNDS_KEY: 1 / rate,
        logs.EVICTED: round(prompts / rate) - prompts,
        "actor/ppo_kl": -0.002,
        "actor/pg_clipfrac": 0.004,
        "response_length/clip_ratio": 0.05,
        "actor/entropy": 0.5,
    }


def recipe_env(tmp_path, python: str, **extra: str) -> dict[str, str]:
    env = {**os.environ, "RUN_DIR": str(tmp_path / "runs"), "PYTHON": python, **extra}
    for var, name in (("MODEL_PATH", "model"), ("DATA_DIR", "data"), ("CKPT_DIR", "ckpt")):
        (tmp_path / name).mkdir(exist_ok=True)
        env[var] = str(tmp_path / name)
    (tmp_path / "runs").mkdir(exist_ok=True)
    return env


def stand_in(tmp_path, arm: str, **extra: str) -> dict[str, str]:
    script = tmp_path / "verl_stand_in"
    script.write_text(STAND_IN.format(python=sys.executable))
    script.chmod(0o755)
    metrics = {k: v for k, v in in_range_step(arm).items() if k != "timing_s/step"}
    return recipe_env(tmp_path, str(script), STANDIN_METRICS=json.dumps(metrics),
                      STANDIN_STEP_S=str(smoke.step_hours(arm) * 3600), **extra)  # fmt: skip


def test_each_launchs_limit_is_the_plans_estimate_of_it_validations_included(tmp_path):
    settings = smoke.SmokeSettings()
    val_h = 1564 * 16 / (36.5 * 16 / 64) / 3600  # the documented validation set at Table 2's N=16 throughput
    for arm, hours in report.smoke_hours().items():  # the plan's estimate of the whole smoke of an arm
        step_h = report.reported_hours_per_step(arm) * 64 / 16
        first, resumed = smoke.launch_hours(arm, settings)
        assert (first, resumed) == pytest.approx((val_h + step_h, step_h + val_h))  # two validations, not four
        assert first + resumed == pytest.approx(hours)
        assert smoke.launch_limits_s(arm) == pytest.approx(
            tuple(smoke.LIMIT_FACTOR * h * 3600 + smoke.STARTUP_S for h in (first, resumed))
        )
        assert min(smoke.launch_limits_s(arm)) > (val_h + step_h) * 3600  # the old 7,200 s was below BroRL's step
    assert smoke.LIMIT_FACTOR == smoke_gates.STEP_TIME_BAND[1]  # a step the report passes does not time out
    assert smoke.DOCUMENTED_VAL_PROMPTS == report.VerlTrainingConfig().dataset_val_count + 100 * 15
    data.write_parquet(data.reasoning_gym_frames(["aiw"], 0, 30, 0)[1], tmp_path / "val.parquet")
    limits = smoke.limits_for(["brorl", "prorl"], None, str(tmp_path), settings)  # what main uses
    assert limits == {a: pytest.approx(smoke.launch_limits_s(a, settings, 30)) for a in ("brorl", "prorl")}
    assert smoke.limits_for(["prorl"], 60.0, str(tmp_path), settings) == {"prorl": (60.0, 60.0)}


def test_an_arm_past_its_limit_is_reported_and_the_next_arm_still_runs(tmp_path, capsys):
    slow = tmp_path / "slow_verl"  # a verl that never reaches its first checkpoint
    slow.write_text("#!/bin/sh\nsleep 600\n")
    slow.chmod(0o755)
    env = recipe_env(tmp_path, str(slow))
    runs = tmp_path / "runs"
    outcomes = smoke.run_arms(
        ["brorl", "prorl"], runs, env, {"brorl": (2, 2), "prorl": (0.5, 0.5)}, smoke.SmokeSettings()
    )
    assert outcomes == {"brorl": smoke.TIMED_OUT, "prorl": smoke.TIMED_OUT}
    err = capsys.readouterr().err
    assert "brorl: TIMED OUT:" in err and "prorl: TIMED OUT:" in err and "prorl: launching" in err
    assert (runs / "prorl" / "logs").is_dir()  # ProRL's launch ran after BroRL's timed out
    assert "smoke run: brorl timed out, prorl timed out" in err


def test_a_smoke_that_resumes_at_the_step_after_the_kill_passes_and_one_that_restarts_fails(tmp_path):
    settings, limits = smoke.SmokeSettings(), (HANG_S, HANG_S)
    for case, extra, outcome in (("resumes", {}, smoke.PASSED), ("restarts", {"STANDIN_RESTART": "1"}, smoke.FAILED)):
        (tmp_path / case).mkdir()
        env = stand_in(tmp_path / case, "brorl", **extra)
        assert smoke.run_arm("brorl", tmp_path / case / "runs", env, limits, settings) == outcome, case


def test_a_rerun_over_an_earlier_runs_checkpoint_and_logs_does_not_pass(tmp_path, capsys):
    env = recipe_env(tmp_path, "/bin/false")  # verl that fails at once
    runs, ckpt = tmp_path / "runs", tmp_path / "ckpt" / "brorl"
    ckpt.mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")  # an earlier run's, both steps done
    (runs / "brorl" / "logs").mkdir(parents=True)
    shutil.copy(record.RECORD_DIR / "smoke" / "brorl" / "config.yaml", runs / "brorl")
    lines = [{"step": s, "data": in_range_step("brorl")} for s in (1, 2)]
    (runs / "brorl" / "logs" / "segment_000.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    limits = (HANG_S, HANG_S)
    assert smoke.run_arm("brorl", runs, env, limits, smoke.SmokeSettings()) == smoke.REFUSED
    err = capsys.readouterr().err
    assert f"brorl: an earlier run is in {ckpt}, {runs / 'brorl'}" in err and "--move-aside" in err
    assert (ckpt / "latest_checkpointed_iteration.txt").is_file()  # refused: nothing touched
    assert smoke.run_arm("brorl", runs, env, limits, smoke.SmokeSettings(), move_aside=True) == smoke.FAILED
    (aside,) = ckpt.parent.glob("brorl.before-*")
    assert (aside / "latest_checkpointed_iteration.txt").read_text() == "2" and not (ckpt / "global_step_2").exists()
    assert len(list(runs.glob("brorl.before-*"))) == 1  # the old run folder, kept beside the new one


def test_every_gate_can_fail_and_a_step_inside_all_ranges_passes(tmp_path):
    arm_dir = tmp_path / "brorl"
    (arm_dir / "logs").mkdir(parents=True)
    shutil.copy(record.RECORD_DIR / "smoke" / "brorl" / "config.yaml", arm_dir)
    estimate = smoke.step_hours("brorl") * 3600

    def verdicts(step: dict) -> dict[str, bool]:
        lines = [{"step": s, "data": in_range_step("brorl")} for s in (1,)] + [{"step": 2, "data": step}]
        (arm_dir / "logs" / "segment_000.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
        return {v.gate.name: v.ok for v in smoke_gates.check("brorl", arm_dir, estimate)}

    good = in_range_step("brorl")
    assert all(verdicts(good).values())
    outside = {  # each metric just outside its range, in the direction that range guards
        "actor/perf/max_memory_reserved_gb": 78.0,
        smoke_metrics.ROUNDS_KEY: 3.5,
        logs.EVICTED: 200,  # kept fraction 128 / 328 = 0.39
        "actor/ppo_kl": 0.0,
        "actor/pg_clipfrac": 0.2,
        "response_length/clip_ratio": 0.3,
        "actor/entropy": 0.01,
    }
    names = {g.key: g.name for g in smoke_gates.gates("brorl", estimate)} | {
        logs.EVICTED: "dynamic sampling kept fraction"
    }
    for key, value in outside.items():
        got = verdicts(good | {key: value})
        assert [n for n, ok in got.items() if not ok] == [names[key]], key
    got = verdicts(good | {"timing_s/step": 2.5 * estimate * 2})  # the median of the two steps: 3 x the estimate
    assert [n for n, ok in got.items() if not ok] == ["seconds per step"]
    got = verdicts({k: v for k, v in good.items() if k != "actor/entropy"})  # a metric not logged fails its gate
    assert [n for n, ok in got.items() if not ok] == ["actor/entropy"]
    assert "FAIL  actor/entropy: 0.5, not logged" in smoke_gates.format_verdicts(
        smoke_gates.check("brorl", arm_dir, estimate)
    )


def test_the_docs_list_every_gates_range_as_an_estimate():
    text = (REPO_ROOT / "docs" / "gpu-and-clusters.md").read_text()
    table = smoke_gates.ranges_table({a: smoke.step_hours(a) * 3600 for a in smoke.ORDER})
    assert table in text
    before = text[: text.index(table)]
    assert "estimate" in before[before.rindex("\n### ") :]  # the section that holds it says so


def test_verl_091_logs_entropy_without_calculate_entropy():
    # the old-log-prob pass computes it (verl/trainer/ppo/v1/trainer_base.py), so the recipe leaves the actor's
    # calculate_entropy (an entropy in every update pass as well) off; the committed CPU run shows it logged
    cfg = yaml.safe_load((record.RECORD_DIR / "cpu" / "brorl" / "config.yaml").read_text())
    assert cfg["actor_rollout_ref"]["actor"]["calculate_entropy"] is False
    merged = logs.merge_segments(sorted((report.RUNS_DIR / "verl-cpu" / "brorl" / "logs").glob(logs.SEGMENT_GLOB)))
    assert all("actor/entropy" in m for m in merged.values() if logs.STEP_TIME in m)
