"""The verl recipe (brorl_lib/verl_recipe): data, rewards, configs, launch scripts, logs to tables.

Everything runs the real thing: reasoning_gym generates the tasks, verl's scorers and Hydra config
compose the arms, verl's own Tracking/file logger writes the logs that are read back.
"""

import json
import math
import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch
from hydra.errors import ConfigCompositionException

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.verl_recipe import codec, configs, data, launch, logs, plots, report, rewards, tasks

SEED = 5
MATH_RECORDS = [
    {"problem": "What is 1/2 + 1/4?", "answer": "\\frac{3}{4}", "solution": "..."},
    {"problem": "Compute 2^10.", "answer": "1024", "solution": "..."},
    {"problem": "What is 3 + 4?", "answer": "7", "solution": "..."},
    {"problem": "Half of 1?", "answer": "\\frac{1}{2}", "solution": "..."},
    {"problem": "Square root of 81?", "answer": "9", "solution": "..."},
]


def notebook_params(**changes) -> dict:
    """The notebook's defaults (what CI runs; declared once, in ``VerlTrainingConfig``), with ``changes``."""
    return {**report.VerlTrainingConfig.defaults(), **changes}


@pytest.fixture(scope="module")
def rg_frames():
    return data.reasoning_gym_frames(list(tasks.DEFAULT_TASKS), 3, 2, SEED)


@pytest.fixture(scope="module")
def arms():
    return {a.name: a for a in (configs.arm("prorl", 16, 512, 535), configs.arm("brorl", 512, 128, 191))}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    return configs.Cluster(
        model_path=str(root / "model"),
        train_files=(str(root / "train.parquet"),),
        val_files=(str(root / "val.parquet"),),
        checkpoint_dir=str(root / "ckpt"),
    )


@pytest.fixture(scope="module")
def composed(arms, cluster):
    """Both arms composed once against verl's ppo_trainer.yaml (composing costs seconds)."""
    return {name: configs.compose(configs.overrides(arm, arms["prorl"], cluster)) for name, arm in arms.items()}


# --- data ---
def test_every_shipped_task_round_trips_through_json():
    """Entries (tuples included, e.g. rearc grids) come back equal, types intact; odd types fail loudly."""
    assert set(tasks.FIGURE4_TASKS) <= set(tasks.DEFAULT_TASKS) <= set(tasks.available_tasks())
    for task in tasks.DEFAULT_TASKS:
        for row in data.reasoning_gym_rows(task, 2, "val", SEED):
            entry = codec.decode_entry(row["extra_info"]["entry"])
            assert codec.decode_entry(codec.encode_entry(entry)) == entry
            assert codec.encode_entry(entry) == row["extra_info"]["entry"]
    assert isinstance(codec.decode_entry(codec.encode_entry({"g": ((1, 2), (3, 4))}))["g"][0], tuple)
    with pytest.raises(TypeError, match="no JSON form"):
        codec.encode_entry({"x": object()})


def test_rows_follow_verls_schema_and_a_seed_fixes_them(rg_frames, tmp_path):
    train, val = rg_frames
    data.check_schema(train, "train")
    data.check_schema(val, "val")
    assert set(val.data_source) == {f"reasoning_gym.{t}" for t in tasks.DEFAULT_TASKS}
    assert (val.groupby("data_source").size() == 2).all()
    assert not set(train.prompt.map(lambda p: p[0]["content"])) & set(val.prompt.map(lambda p: p[0]["content"]))
    row = train.iloc[0]
    assert row.prompt[0]["role"] == "user" and data.RG_INSTRUCTION in row.prompt[0]["content"]
    assert row.reward_model["style"] == "rule" and row.ability == "reasoning_gym"
    # same seed: same rows and the same parquet bytes; another seed: other rows
    again, _ = data.reasoning_gym_frames(list(tasks.DEFAULT_TASKS), 3, 2, SEED)
    pd.testing.assert_frame_equal(train, again)
    a, b = data.write_parquet(train, tmp_path / "a.parquet"), data.write_parquet(again, tmp_path / "b.parquet")
    assert a.read_bytes() == b.read_bytes()
    other, _ = data.reasoning_gym_frames(["countdown"], 3, 0, SEED + 1)
    assert not set(other.prompt.map(lambda p: p[0]["content"])) & set(train.prompt.map(lambda p: p[0]["content"]))
    back = data.read_parquet(a)
    assert back.extra_info[0] == train.extra_info[0] and len(back) == len(train)


def test_a_data_file_with_the_wrong_schema_is_refused(rg_frames, tmp_path):
    train, _ = rg_frames
    train.drop(columns=["extra_info"]).to_parquet(tmp_path / "no_extra.parquet")
    with pytest.raises(ValueError, match=r"no_extra.parquet: missing columns \['extra_info'\]"):
        data.read_parquet(tmp_path / "no_extra.parquet")
    train.assign(prompt=train.prompt.map(lambda p: p[0]["content"])).to_parquet(tmp_path / "str_prompt.parquet")
    with pytest.raises(ValueError, match="str_prompt.parquet: row 0: prompt must be"):
        data.read_parquet(tmp_path / "str_prompt.parquet")
    with pytest.raises(ValueError, match="data_source='gsm8k' is not allowed"):
        data.check_schema(train.assign(data_source="gsm8k"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        data.read_parquet(tmp_path / "absent.parquet")
    with pytest.raises(ValueError, match="rg_tasks holds unknown or excluded tasks \\['no_such_task'\\]"):
        data.reasoning_gym_frames(["countdown", "no_such_task"], 1, 1, 0)


def test_math_from_local_files_and_a_clear_error_for_a_missing_dataset(tmp_path, monkeypatch):
    jsonl, js, pq = tmp_path / "dsr.jsonl", tmp_path / "dsr.json", tmp_path / "dsr.parquet"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in MATH_RECORDS))
    js.write_text(json.dumps(MATH_RECORDS))
    pd.DataFrame(MATH_RECORDS).to_parquet(pq)
    frames = [data.records_frames(str(p), "math", 0, 2, SEED, "math_dataset") for p in (jsonl, js, pq)]
    for train, val in frames:
        data.check_schema(pd.concat([train, val]))
        assert (len(train), len(val)) == (3, 2)
        assert train.data_source[0] == "math.dsr" and data.MATH_INSTRUCTION in train.prompt[0][0]["content"]
        pd.testing.assert_frame_equal(train, frames[0][0])  # same records, same seed: same rows, whatever the format
    answers = {r["problem"]: r["answer"] for r in MATH_RECORDS}
    for _, r in pd.concat(frames[0]).iterrows():
        assert answers[r.prompt[0]["content"].split("\n\n")[0]] == r.reward_model["ground_truth"]
    assert len(data.records_frames(str(jsonl), "math", 1, 2, SEED, "math_dataset")[0]) == 1
    with pytest.raises(FileNotFoundError, match=r"math_dataset='.*absent.jsonl': no such file; supply a local JSON"):
        data.records_frames(str(tmp_path / "absent.jsonl"), "math", 0, 1, SEED, "math_dataset")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"question": "x", "answer": "1"}) + "\n")
    with pytest.raises(ValueError, match=r"records lack fields \['problem'\]"):
        data.records_frames(str(tmp_path / "bad.jsonl"), "math", 0, 1, SEED, "math_dataset")
    # a Hugging Face id without network (offline mode, so no retries): the error names it and the way out
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(FileNotFoundError, match="Hugging Face dataset brorl-test/no-such-dataset could not be loaded"):
        data.records_frames("brorl-test/no-such-dataset", "math", 0, 1, SEED, "math_dataset")


# --- rewards ---
def test_reasoning_gym_reward_is_one_for_the_right_answer_and_zero_otherwise(rg_frames):
    _, val = rg_frames
    for _, r in val.iterrows():
        answer = codec.decode_entry(r.extra_info["entry"])["answer"]
        truth = r.reward_model["ground_truth"]

        def call(text: str, r=r, truth=truth) -> dict:
            return rewards.compute_score(r.data_source, text, truth, r.extra_info)

        assert call(f"Let me think.\n<answer>{answer}</answer>") == {"score": 1.0, "acc": 1.0}, r.data_source
        wrong = call("<answer>certainly not this</answer>")
        assert wrong["acc"] == 0.0 and wrong["score"] <= 0.05, r.data_source  # some tasks give format credit
        assert call(str(answer)) == {"score": 0.0, "acc": 0.0}  # no <answer> tags: ProRL's format is required
    pf = data.reasoning_gym_rows("prime_factorization", 1, "val", 0)[0]  # its verifier raises on junk: scored 0
    assert rewards.compute_score(pf["data_source"], "<answer>junk</answer>", "", pf["extra_info"])["score"] == 0.0


def test_math_reward_uses_verls_scorer_then_math_verify():
    def score(text: str, gt: str, mv: str = "inline") -> dict:
        return rewards.compute_score("math.dsr", text, gt, {}, math_verify=mv)

    assert score(r"... so \boxed{\frac{3}{4}}", r"\frac{3}{4}") == {"score": 1.0, "acc": 1.0}
    assert score(r"... so \boxed{\dfrac34}", r"\frac{3}{4}")["score"] == 1.0  # verl's MATH normaliser
    assert score(r"... so \boxed{0.75}", r"\frac{3}{4}")["score"] == 1.0  # only Math-Verify sees this
    assert score(r"... so \boxed{0.75}", r"\frac{3}{4}", "off")["score"] == 0.0
    assert score(r"... so \boxed{0.7}", r"\frac{3}{4}") == {"score": 0.0, "acc": 0.0}
    assert score("no box at all", "7")["score"] == 0.0
    assert rewards.compute_score("stem.scp", r"\boxed{9}", "9", {})["acc"] == 1.0
    with pytest.raises(ValueError, match="math_verify='fast' is not allowed"):
        score(r"\boxed{1}", "1", "fast")
    with pytest.raises(ValueError, match="data_source='gsm8k.x' is not allowed"):
        rewards.compute_score("gsm8k.x", r"\boxed{1}", "1", {})


def test_code_rows_from_a_local_file_and_their_reward_is_the_share_of_tests_passed(tmp_path):
    records = [
        {
            "problem": "Add two integers.",
            "data_source": "apps",
            "tests": {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]},
        }
    ]
    (tmp_path / "code.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    train, _ = data.records_frames(str(tmp_path / "code.jsonl"), "code", 0, 0, SEED, "code_dataset")
    data.check_schema(train)
    row = train.iloc[0]
    assert row.data_source == "code.apps" and json.loads(row.reward_model["ground_truth"]) == records[0]["tests"]
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    half = "```python\na, b = map(int, input().split())\nprint(3)\n```"
    truth = row.reward_model["ground_truth"]

    def score(text: str) -> dict:
        return rewards.compute_score(row.data_source, text, truth, row.extra_info)

    assert score(right) == {"score": 1.0, "acc": 1.0}
    assert score(half) == {"score": 0.5, "acc": 0.0}


# --- configs ---
def test_learning_rate_rule_is_the_square_root_of_the_samples_ratio(arms):
    assert configs.learning_rate(arms["brorl"], arms["prorl"], 1e-6) == pytest.approx(1e-6 * math.sqrt(8))
    assert configs.learning_rate(arms["prorl"], arms["prorl"], 1e-6) == pytest.approx(1e-6)
    quarter = configs.arm("brorl", 128, 128, 10)  # 16384 samples per step: twice ProRL's
    assert configs.learning_rate(quarter, arms["prorl"], 2e-6) == pytest.approx(2e-6 * math.sqrt(2))
    assert configs.mini_batch_prompts(arms["prorl"]) * 4 == 512 and configs.mini_batch_prompts(arms["brorl"]) * 4 == 128


def test_both_arms_compose_validate_and_differ_exactly_where_they_should(composed, arms):
    for cfg in composed.values():
        configs.validate(cfg)  # verl's validate_config
    diff = configs.config_diff(composed).set_index("key")
    assert set(diff.index) == {
        "data.train_batch_size",
        "actor_rollout_ref.rollout.n",
        "actor_rollout_ref.actor.rollout_n",
        "actor_rollout_ref.ref.rollout_n",
        "critic.rollout_n",  # interpolations of rollout.n
        "trainer.v1.sampler.sampler_kwargs.train_batch_size",  # the guard's copy of data.train_batch_size
        "actor_rollout_ref.actor.ppo_mini_batch_size",
        "critic.ppo_mini_batch_size",
        "actor_rollout_ref.actor.optim.lr",
        "trainer.total_training_steps",
        "trainer.save_freq",  # BroRL's at most 3 (configs.MAX_SAVE_FREQ)
        "trainer.experiment_name",
        "actor_rollout_ref.rollout.trace.experiment_name",
        "trainer.default_local_dir",
    }
    pro, bro = composed["prorl"], composed["brorl"]
    assert (pro.actor_rollout_ref.rollout.n, bro.actor_rollout_ref.rollout.n) == (16, 512)
    assert (pro.data.train_batch_size, bro.data.train_batch_size) == (512, 128)
    mini = [c.data.train_batch_size // c.actor_rollout_ref.actor.ppo_mini_batch_size for c in (pro, bro)]
    assert mini == [4, 4]  # the same number of PPO mini-batches per step
    assert bro.actor_rollout_ref.actor.optim.lr / pro.actor_rollout_ref.actor.optim.lr == pytest.approx(math.sqrt(8))
    for c in (pro, bro):  # the shared ProRLv2-like base
        actor, algo = c.actor_rollout_ref.actor, c.algorithm
        assert algo.adv_estimator == "reinforce_plus_plus_baseline"
        assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.loss_agg_mode) == (0.2, 0.28, "token-mean")
        assert (actor.use_kl_loss, actor.kl_loss_type, actor.kl_loss_coef) == (True, "k2", 1e-4)
        assert (algo.filter_groups.enable, algo.filter_groups.metric) == (True, "acc")
        assert algo.rollout_correction.rollout_is_threshold == "0.5_5.0"
        assert c.data.max_response_length == 16384 and c.actor_rollout_ref.rollout.temperature == 1.2
        assert c.trainer.resume_mode == "auto" and "file" in c.trainer.logger and c.trainer.use_v1
        assert c.reward.custom_reward_function.path == "pkg://brorl_lib.verl_recipe.rewards"
        assert c.reward.custom_reward_function.reward_kwargs.math_verify == "pool"
    assert "lr: 2.828427" in configs.to_yaml(bro)


def test_unknown_keys_fail_and_the_launch_scripts_extra_keys_compose(arms, cluster):
    ov = configs.overrides(arms["prorl"], arms["prorl"], cluster)
    with pytest.raises(ConfigCompositionException, match="clip_ratio_hi"):
        configs.compose([*ov, "actor_rollout_ref.actor.clip_ratio_hi=0.3"])
    extra = [
        "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH='/x/logs/segment_000.jsonl'",
        "+ray_kwargs.ray_init.runtime_env.env_vars.PYTHONPATH='/repo'",
    ]
    env = configs.compose([*ov, *extra]).ray_kwargs.ray_init.runtime_env.env_vars
    assert env.VERL_FILE_LOGGER_PATH == "/x/logs/segment_000.jsonl" and env.PYTHONPATH == "/repo"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"arms": ["prorl", "dapo"]}, "arms item='dapo' is not allowed: expected one of"),
        ({"brorl_rollouts": 0}, "brorl_rollouts=0 is not allowed: expected"),
        (
            {"prorl_prompts_per_step": 510},
            "prorl_prompts_per_step=510 is not allowed: it must be divisible by ppo_mini_batches=4",
        ),
        ({"ppo_mini_batches": 0}, "ppo_mini_batches=0 is not allowed: expected"),
        ({"base_lr": -1.0}, "base_lr=-1.0 is not allowed: expected"),
        ({"rg_tasks": ["countdown", "apps"]}, "rg_tasks holds unknown or excluded tasks \\['apps'\\]"),
        ({"run_name": "my run"}, "run_name='my run' is not allowed"),
        ({"execute": True}, "model_path='' is not allowed when execute=True"),
        (
            {"execute": True, "model_path": "/no/such/model"},
            "model_path='/no/such/model' is not allowed when execute=True",
        ),
    ],
)
def test_bad_parameters_raise_before_any_work(changes, message):
    with pytest.raises(ValueError, match=message):
        report.VerlTrainingConfig(**notebook_params(**changes))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without GPUs")
def test_execute_on_a_machine_without_gpus_stops_before_building(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="work_dir='' is not allowed when execute=True"):
        report.VerlTrainingConfig(**notebook_params(execute=True, model_path=str(model)))
    with pytest.raises(ValueError, match="execute=True is not allowed here: .*gpu: this node has 0 CUDA GPU"):
        report.VerlTrainingConfig(**notebook_params(execute=True, model_path=str(model), work_dir=str(tmp_path)))
    assert not (report.RUNS_DIR / "brorl-repro").exists()


@pytest.mark.parametrize("name", [".", "..", "-x", ".hidden", "a/b", "../up", "~", "a b", "a" * 101, ""])
def test_run_name_is_one_safe_folder_name(name):
    """run_name is a folder under build/verl and data/runs/verl: "." and ".." would climb out of it."""
    with pytest.raises(ValueError, match=r"^run_name=.* is not allowed: expected one folder name: .*"):
        report.VerlTrainingConfig(**notebook_params(run_name=name))
    assert "starting with a letter or digit" in report.VerlTrainingConfig.parameter("run_name").cell_line()
    report.VerlTrainingConfig(**notebook_params(run_name="run.2_b-" + "x" * 92))  # 100 characters


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("math_dataset", "no_such.jsonl", "no such file"),
        ("stem_dataset", "./missing", "no such file"),
        ("code_dataset", "~/no/such/code.parquet", "no such file"),
        ("math_dataset", "/no/such/dir/math", "no such file"),
        ("math_dataset", "data/no/such", "no such file .* and not a Hugging Face dataset id"),
        ("math_dataset", "[a]", "no such file .* and not a Hugging Face dataset id"),
        ("math_dataset", "x" * 5000, "not a usable path"),
        ("code_dataset", "FOLDER", "a folder, not a file"),
        ("stem_dataset", "records.txt", "the file must end in one of"),
    ],
)
def test_a_local_dataset_that_is_not_there_is_refused_before_any_work(tmp_path, monkeypatch, name, value, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "records.txt").write_text("{}\n")
    value = str(tmp_path) if value == "FOLDER" else value
    with pytest.raises(ValueError, match=rf"^{name}={re.escape(repr(value))} is not allowed: {message}") as err:
        report.VerlTrainingConfig(**notebook_params(**{name: value}))
    assert "Hugging Face dataset id (owner/name) or a local .json, .jsonl or .parquet file" in str(err.value)


def test_dataset_ids_and_local_files_that_exist_are_accepted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "math.jsonl").write_text(json.dumps(MATH_RECORDS[0]) + "\n")
    for value in ("agentica-org/DeepScaleR-Preview-Dataset", "gsm8k", "math.jsonl", str(tmp_path / "math.jsonl")):
        cfg = report.VerlTrainingConfig(**notebook_params(math_dataset=value, stem_dataset=value, code_dataset=value))
        assert cfg.math_dataset == value


@pytest.mark.parametrize("name", ["model_path", "work_dir", "run_name", "math_dataset", "stem_dataset"])
def test_a_list_where_a_path_or_name_is_expected_is_refused(name):
    """From Python (papermill -y, a profile) and from ``-p NAME [x]``: never the text "[x]"."""
    with pytest.raises(ValueError, match=rf"^{name}=\['x'\] is not allowed: expected "):
        report.VerlTrainingConfig(**notebook_params(**{name: ["x"]}))
    p = report.VerlTrainingConfig.parameter(name)
    for text, what in (("[x]", "a list"), ('["x", "y"]', "a list"), ("{x: 1}", "a mapping")):
        with pytest.raises(ValueError, match=rf"^{name}={re.escape(repr(text))} is not allowed: it reads as {what}"):
            p.parse(text)
    assert p.parse('"[x]"') == "[x]"  # quoted: the text itself, for the declaration's own checks


# --- launch script ---
def test_launch_script_trains_in_stops_and_resumes_into_a_fresh_log_segment_each_time(arms, cluster, tmp_path):
    arm_dir = tmp_path / "run" / "brorl"
    arm = configs.arm("brorl", 512, 128, 150)  # stops at Table 1's 107 and 134, then its own last step
    assert launch.stops(arm) == [107, 134, 150] and launch.stops(arms["brorl"]) == [107, 134, 191]
    ov = configs.overrides(arm, arms["prorl"], cluster)
    arm_dir.mkdir(parents=True)
    (arm_dir / "overrides.txt").write_text("\n".join(ov) + "\n")  # as notebook 05 writes it (report.prepare)
    text = launch.script_text(arm, arm_dir, REPO_ROOT)
    for needed in ("ARM=brorl", 'STOPS="107 134 150"', f"ARM_DIR={arm_dir}", "recipes/brorl/launch_arm.sh"):
        assert needed in text
    script = arm_dir / "launch.sh"
    script.write_text(text)
    # a stand-in interpreter records what it was given, writes a log line as verl's file logger would, and
    # checkpoints the run's last step as verl does (the last of repeated Hydra overrides wins)
    fake = tmp_path / "fake_python.sh"
    fake.write_text(
        '#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$VERL_FILE_LOGGER_PATH.args"\n'
        'for a in "$@"; do case "$a" in trainer.total_training_steps=*) last=${a#*=};; '
        "trainer.default_local_dir=*) ckpt=${a#*=};; esac; done\n"
        'mkdir -p "$ckpt" && echo "$last" > "$ckpt/latest_checkpointed_iteration.txt"\n'
        'echo \'{"step": 1, "data": {}}\' > "$VERL_FILE_LOGGER_PATH"\necho "python ran"\n'
    )
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake)}
    marker = Path(cluster.checkpoint_dir) / "brorl" / "latest_checkpointed_iteration.txt"
    marker.unlink(missing_ok=True)

    def run(*extra: str) -> list[str]:
        out = subprocess.run(["bash", str(script), *extra], env=env, capture_output=True, text=True, check=True)
        return out.stdout.splitlines()

    lines = run()  # one launch of verl per stop
    segments = sorted((arm_dir / "logs").glob("*.jsonl"))
    assert [p.name for p in segments] == [f"segment_{i:03d}.jsonl" for i in range(3)]
    steps = [(p.parent / f"{p.name}.args").read_text().splitlines() for p in segments]
    assert [a[2 + len(ov)] for a in steps] == [f"trainer.total_training_steps={s}" for s in (107, 134, 150)]
    assert steps[1][:2] == ["-m", "verl.trainer.main_ppo"] and steps[1][2 : 2 + len(ov)] == ov
    # validation before training on the first launch only, not again at each resumed stop
    assert "trainer.val_before_train=true" in ov and "trainer.val_before_train=false" not in steps[0]
    assert all(a[3 + len(ov)] == "trainer.val_before_train=false" for a in steps[1:])
    assert (
        f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH='{arm_dir}/logs/segment_001.jsonl'"
        in (steps[1])
    )
    assert "python ran" in (arm_dir / "console.log").read_text() and any("segment 1" in ln for ln in lines)
    assert run() == [] and len(list((arm_dir / "logs").glob("*.jsonl"))) == 3  # every stop checkpointed
    marker.write_text("120\n")  # a crash after checkpoint 120: the relaunch resumes towards 134, then 150
    lines = run("trainer.save_freq=5")
    args = (arm_dir / "logs" / "segment_004.jsonl.args").read_text().splitlines()
    assert any("steps 120 to 134, segment 3" in ln for ln in lines) and args[-1] == "trainer.save_freq=5"


# --- logs to tables and figures ---
def _log_segment(path, records, monkeypatch):
    """Write ``records`` [(step, metrics)] with verl's own Tracking and file logger."""
    from verl.utils.tracking import Tracking

    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    tracker = Tracking(project_name="brorl", experiment_name="test", default_backend=["file"])
    for step, metrics in records:
        tracker.log(data=metrics, step=step)
    tracker.finish()


def _train(step_s, evicted, surplus=0, score=0.5):
    """A training step's record; like verl (v1/replay_buffer.py), the filter_groups counts only when non-zero."""
    counts = {
        "training/filter_groups/evicted_samples": evicted,
        "training/filter_groups/discarded_surplus_samples": surplus,
    }
    return {
        "timing_s/step": step_s,
        **{k: v for k, v in counts.items() if v},
        "critic/score/mean": score,
        "training/global_step": 0,
    }


def _val(math_acc, rg_acc, rg_score):
    return {
        "val-core/math.dsr/acc/mean@16": math_acc,
        "val-aux/math.dsr/score/mean@16": math_acc,
        "val-core/reasoning_gym.countdown/acc/mean@16": rg_acc,
        "val-aux/reasoning_gym.countdown/score/mean@16": rg_score,
        "val-aux/num_turns/mean": 1.0,
    }


def test_logs_of_two_segments_become_a_tidy_frame_and_the_papers_tables(composed, tmp_path, monkeypatch, out_dir):
    arm_dir = tmp_path / "runs" / "run1" / "brorl"
    (arm_dir / "logs").mkdir(parents=True)
    (arm_dir / "config.yaml").write_text(configs.to_yaml(composed["brorl"]))
    # segment 0: validation at step 0, steps 1-3 (checkpoint at 2), then a crash
    _log_segment(
        arm_dir / "logs" / "segment_000.jsonl",
        [
            (0, _val(0.60, 0.20, 0.30)),
            (1, _train(3600.0, 32)),
            (2, {**_train(3600.0, 64, 16), **_val(0.62, 0.25, 0.35)}),
            (3, _train(9999.0, 999)),
        ],
        monkeypatch,
    )
    with open(arm_dir / "logs" / "segment_000.jsonl", "a") as fh:
        fh.write('{"step": 4, "data": {"timing_')  # half-written line of the crash
    # segment 1: resumed from step 2 (verl validates again, then redoes step 3, evicting nothing: verl omits the count)
    _log_segment(
        arm_dir / "logs" / "segment_001.jsonl",
        [
            (2, _val(0.63, 0.25, 0.35)),
            (3, _train(1800.0, 0)),
            (4, {**_train(1800.0, 128), **_val(0.66, 0.30, 0.45)}),
        ],
        monkeypatch,
    )
    assert logs.trained_steps(arm_dir / "logs") == {1, 2, 3, 4}  # step 0 is validation only
    run = logs.read_run(arm_dir)
    assert (run.run, run.arm, run.n_rollouts, run.prompts_per_step, run.segments) == ("run1", "brorl", 512, 128, 2)
    s = run.steps.set_index("step")
    assert list(s.index) == [0, 1, 2, 3, 4]
    assert s.loc[3, "step_s"] == 1800.0 and s.loc[3, "evicted_groups"] == 0  # the later segment wins
    assert logs.EVICTED not in logs.merge_segments(sorted((arm_dir / "logs").glob("*.jsonl")))[3]  # not the crash's 999
    assert s.hours.tolist() == pytest.approx([0.0, 1.0, 2.0, 2.5, 3.0])
    assert s.loc[2, "samples_step"] == (128 + 64 + 16) * 512 and s.loc[2, "pass_rate"] == pytest.approx(144 / 208)
    # Table 1's accounting: kept samples over the pass rate, without the 16 surplus groups verl generated
    assert s.loc[2, "samples_table1_step"] == pytest.approx(128 * 512 / (144 / 208))
    assert s.loc[2, "samples_table1_step"] < s.loc[2, "samples_step"] and s.loc[0, "samples_table1"] == 0
    assert s.loc[1, "pass_rate"] == pytest.approx(128 / 160) and s.loc[0, "samples"] == 0
    assert s.samples.iloc[-1] == (128 * 4 + 32 + 80 + 0 + 128) * 512
    v = run.validation.set_index(["step", "data_source", "var"])["value"]
    assert v.loc[(2, "math.dsr", "acc")] == 0.63 and v.loc[(4, "reasoning_gym.countdown", "score")] == 0.45
    assert set(run.validation.family) == {"math", "reasoning_gym"}

    runs = logs.find_runs(tmp_path / "runs")
    assert [(r.run, r.arm) for r in runs] == [("run1", "brorl")]
    t1 = report.table1_rows(runs)
    assert t1.steps.tolist() == ["+0", "+4"] and t1.source.unique().tolist() == ["run run1"]
    last = t1.iloc[-1]
    assert (last.math_score, last.reasoning_gym_score, last.time_h) == pytest.approx((66.0, 45.0, 3.0))
    assert last.samples_k == pytest.approx(s.samples.iloc[-1] / 1000) and pd.isna(last.code_score)
    both = report.table1_beside_paper(runs)
    assert both.source.value_counts().to_dict() == {"reported": 6, "run run1": 2}
    # the paper's batch shape, but 4 steps: not the paper's scale
    assert report.runs_provenance(runs) == "scaled-down" and report.runs_provenance([]) == "reported"
    f1 = report.figure1_points(runs)
    assert set(f1.source) == {"reported", "run run1"}
    assert f1[(f1.source == "run run1") & (f1.domain == "Math")].score.tolist() == pytest.approx([60.0, 63.0, 66.0])
    f4 = report.figure4_points(runs)
    assert f4.task.unique().tolist() == ["countdown"] and f4.pass_at_1.tolist() == pytest.approx([0.2, 0.25, 0.3])
    plots.figure1(f1)
    assert sum(ax.get_visible() for ax in plots.figure4(f4).axes) == 1  # only the task with data: no empty panels
    with pytest.raises(ValueError, match="no points"):
        plots.figure4(f4.iloc[:0])
    assert report.paper_scale_runs(runs) == [] and report.cpu_runs(runs) == []  # a cuda run, 4 steps


def test_runs_are_reproduced_only_at_the_papers_steps_and_response_length(composed, tmp_path, monkeypatch):
    """Table 1's longest row per arm (ProRL +535, BroRL +191) and 16k responses; anything less is scaled-down."""
    import yaml

    assert (report.paper_steps("prorl"), report.paper_steps("brorl")) == (535, 191)

    def arm_run(name, arm, steps, response_length=configs.MAX_RESPONSE_LENGTH):
        arm_dir = tmp_path / name / "runs" / "r" / arm
        (arm_dir / "logs").mkdir(parents=True)
        cfg = yaml.safe_load(configs.to_yaml(composed[arm]))
        cfg["data"]["max_response_length"] = response_length
        (arm_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
        _log_segment(
            arm_dir / "logs" / "segment_000.jsonl",
            [(0, _val(0.6, 0.2, 0.3))] + [(k, _train(60.0, 8)) for k in range(1, steps + 1)],
            monkeypatch,
        )
        return logs.read_run(arm_dir)

    brorl_191, prorl_535 = arm_run("b191", "brorl", 191), arm_run("p535", "prorl", 535)
    assert (report.last_trained_step(brorl_191), brorl_191.max_response_length) == (191, 16384)
    assert report.runs_provenance([brorl_191]) == "reproduced"
    assert report.runs_provenance([brorl_191, prorl_535]) == "reproduced"
    assert report.runs_provenance([arm_run("b190", "brorl", 190)]) == "scaled-down"  # one step short
    assert report.runs_provenance([brorl_191, arm_run("p191", "prorl", 191)]) == "scaled-down"  # ProRL needs 535
    assert report.runs_provenance([arm_run("b8k", "brorl", 191, 8192)]) == "scaled-down"  # 8k responses
    assert report.paper_scale_runs([brorl_191, arm_run("b190b", "brorl", 190)]) == [brorl_191]


def test_plan_reproduces_table1_hours_and_scales_with_the_cluster():
    plan = report.plan_table(report.VerlTrainingConfig(**notebook_params())).set_index("arm")
    assert plan.kept_samples_per_step.tolist() == [8192, 65536]
    assert plan.expected_hours.tolist() == pytest.approx([133.8, 173.8])
    assert plan.lr_ratio.tolist() == pytest.approx([1.0, math.sqrt(8)])
    assert plan.expected_samples_per_step.tolist() == pytest.approx([8192 / 0.41, 65536 / 0.62])
    half = report.plan_table(report.VerlTrainingConfig(**notebook_params(nnodes=16, arms=["brorl"], brorl_steps=10)))
    assert half.expected_hours.tolist() == pytest.approx([173.8 / 191 * 10 / 2])
    assert half.hours_basis.tolist() == [  # the plan says its hours are an estimate, and from what
        "estimate: Table 1's hours per step scaled linearly by samples per step (65,536 → 65,536) "
        "and by GPUs (64 → 128)"
    ]


def test_schedules_run_the_arms_one_after_the_other_or_side_by_side_on_half_the_gpus():
    plan = report.plan_table(report.VerlTrainingConfig(**notebook_params()))
    s = report.schedule_table(plan).set_index("schedule")
    seq, side = s.loc[report.SEQUENTIAL], s.loc[report.SIDE_BY_SIDE]
    assert (seq.gpus_per_arm, side.gpus_per_arm) == (64, 32)
    step = 173.8 / 191 * 64 / 16  # BroRL's step in the smoke profile: Table 1's hours per step on 16 GPUs
    val = 1564 * 16 / (36.5 * 16 / 64) / 3600  # one validation: the documented set at Table 2's N=16 throughput
    first = val + step  # BroRL's first full step comes after the validation before training
    brorl = 2 * step + 2 * val  # two steps and two validations of each arm, BroRL first
    smoke_h = brorl + 2 * 133.8 / 535 * 64 / 16 + 2 * val
    assert report.smoke_hours() == pytest.approx({"brorl": brorl, "prorl": smoke_h - brorl})
    assert list(report.smoke_hours()) == ["brorl", "prorl"]
    for row in (seq, side):  # the smoke first: BroRL's first full step long before ProRL's week ends
        assert (row.brorl_first_full_step_h, row.smoke_ends_h) == pytest.approx((first, smoke_h))
    assert seq.brorl_first_full_step_h < seq.prorl_ends_h - 133.8  # before ProRL's run starts
    assert (seq.prorl_ends_h, seq.brorl_ends_h, seq.wall_hours) == pytest.approx(
        (smoke_h + 133.8, smoke_h + 307.6, smoke_h + 307.6)
    )
    assert (side.prorl_ends_h, side.brorl_ends_h, side.wall_hours) == pytest.approx(
        (smoke_h + 267.6, smoke_h + 347.6, smoke_h + 347.6)
    )
    assert side.cluster_gpu_hours == pytest.approx((smoke_h + 347.6) * 64)
    assert "estimate" in report.schedule_note(report.schedule_table(plan))
    one = report.schedule_table(report.plan_table(report.VerlTrainingConfig(**notebook_params(arms=["brorl"]))))
    assert one.schedule.tolist() == [report.SEQUENTIAL]  # one arm: nothing to run beside it


def test_cpu_run_gets_a_figure_of_its_own_labelled_with_each_arms_logged_batch_shape():
    runs = report.find_runs()
    cpu = report.cpu_runs(runs)
    if not cpu:
        pytest.skip("no CPU run under data/runs/verl")
    points = report.cpu_run_points(runs)
    for run in cpu:
        label = report.arm_label(run)
        assert f"N={run.n_rollouts:,} × {run.prompts_per_step:,} prompt" in label
        mine = points[points.label == label]
        assert report.TRAIN_PANEL in set(mine.panel) and mine.panel.str.startswith("pass@1: ").any()
    assert not report.paper_scale_runs(cpu)  # never drawn on the paper's axes
    fig = plots.cpu_run(points)
    assert fig.legends and [t.get_text() for t in fig.legends[0].get_texts()] == list(dict.fromkeys(points.label))
    assert report.cpu_run_points([]).empty and "make verl-cpu-run" in report.NO_CPU_RUN
    assert "recipes/brorl/README.md" in report.paper_scale_note()


def test_notebook_path_builds_checks_and_writes_both_arms(tmp_path, monkeypatch):
    """What the notebook does with execute=False: data (with math), reward checks, configs and scripts."""
    monkeypatch.setattr(report, "PLAN_DIR", tmp_path / "plan")
    (tmp_path / "dsr.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MATH_RECORDS))
    cfg = report.VerlTrainingConfig(
        **notebook_params(
            rg_tasks=["countdown", "rearc"],
            rg_train_per_task=2,
            rg_val_per_task=1,
            math_dataset=str(tmp_path / "dsr.jsonl"),
            dataset_val_count=2,
        )
    )
    train, val = report.build_data(cfg)
    assert set(val.ability) == {"reasoning_gym", "math"} and len(val) == 4 and len(train) == 2 * 2 + 3
    checks = report.reward_checks(val).set_index("data_source")
    assert (checks.right.dropna() == 1.0).all() and (checks.wrong.dropna() <= 0.05).all()
    assert checks.loc["math.dsr", "right"] == 1.0 and checks.loc["reasoning_gym.rearc", "untagged"] == 0.0
    prepared = report.prepare(cfg, train, val)
    assert len(data.read_parquet(prepared.train_file)) == len(train)
    for arm, n in (("prorl", 16), ("brorl", 512)):
        arm_dir = tmp_path / "plan" / "brorl-repro" / arm
        assert yaml_load(arm_dir / "config.yaml")["actor_rollout_ref"]["rollout"]["n"] == n
        assert (arm_dir / "overrides.txt").read_text().splitlines() == prepared.overrides[arm]
        assert json.loads((arm_dir / "plan.json").read_text())["N"] == n
        assert os.access(prepared.scripts[arm], os.X_OK)
        subprocess.run(["bash", "-n", str(prepared.scripts[arm])], check=True)  # valid bash
    assert not (report.RUNS_DIR / "brorl-repro").exists()  # planning never writes into data/runs


def yaml_load(path):
    import yaml

    return yaml.safe_load(path.read_text())
