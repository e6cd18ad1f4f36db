"""The committed record of the paper's arms (recipes/brorl/) and the paired t-test between evaluated arms.

The record is regenerated into a temporary folder and compared byte for byte with the committed one;
its scripts run with a stand-in interpreter that records what it was given, and what they pass is
composed again by Hydra against verl's own config.
"""

import dataclasses
import os
import shlex
import shutil
import subprocess

import numpy as np
import pytest
from scipy import stats as sps

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.profiles import notebook_defaults
from brorl_lib.core.registry import get_notebook
from brorl_lib.evaluation import cli as eval_cli
from brorl_lib.evaluation import results as res
from brorl_lib.verl_recipe import configs, launch, logs, record, report
from brorl_lib.verl_recipe.cpu import profile

REFRESH = f"refresh with: {record.COMMAND}"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The committed record with its generated files written afresh (composing the arms takes seconds)."""
    out = tmp_path_factory.mktemp("record") / "brorl"
    shutil.copytree(record.RECORD_DIR, out)
    for rel in record.record_files():
        (out / rel).unlink()
    record.write_record(out)
    return out


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_committed_record_is_what_the_library_generates(generated):
    committed = record.RECORD_DIR
    assert _files(generated) == sorted([*record.record_files(), *record.HAND_WRITTEN])
    assert _files(committed) == _files(generated), f"recipes/brorl holds other files than the record; {REFRESH}"
    for rel in record.record_files():
        new, old = (generated / rel).read_bytes(), (committed / rel).read_bytes()
        assert new == old, f"recipes/brorl/{rel} differs from a fresh generation; {REFRESH}"
    for rel in record.EXECUTABLE:
        assert os.access(committed / rel, os.X_OK), f"recipes/brorl/{rel} is not executable; {REFRESH}"


def test_check_names_each_stale_file_and_the_refresh_command(generated, tmp_path, capsys):
    copy = tmp_path / "brorl"
    shutil.copytree(generated, copy)
    assert record.main(["--check", "--out", str(copy)]) == 0
    (copy / "brorl" / "overrides.txt").write_text("actor_rollout_ref.rollout.n=16\n")
    (copy / "evaluate.sh").unlink()
    (copy / "notes.txt").write_text("hand-written\n")
    assert record.main(["--check", "--out", str(copy)]) == 1
    err = capsys.readouterr().err
    for line in ("brorl/overrides.txt: differs", "evaluate.sh: missing", "notes.txt: not part of the record", REFRESH):
        assert line in err


def test_record_holds_no_machine_paths_and_states_the_cluster(generated):
    for rel in _files(generated):
        text = (generated / rel).read_text()
        for local in (str(REPO_ROOT), os.path.expanduser("~"), str(generated)):
            assert local not in text, f"{rel} holds the machine path {local}"
    for arm in ("prorl", "brorl"):
        overrides = (generated / arm / "overrides.txt").read_text()
        assert "actor_rollout_ref.model.path='<MODEL_PATH>'" in overrides
        assert f"trainer.default_local_dir='<CKPT_DIR>/{arm}'" in overrides
        assert "trainer.nnodes=8" in overrides and "trainer.n_gpus_per_node=8" in overrides
        assert "8 x 8 is our reading" in (generated / arm / "launch.sh").read_text()
        subprocess.run(["bash", "-n", str(generated / arm / "launch.sh")], check=True)  # valid bash
    subprocess.run(["bash", "-n", str(generated / "evaluate.sh")], check=True)
    assert "8 × 8 is our reading" in (generated / "README.md").read_text()


def test_record_is_the_papers_arms_as_notebook_05_sets_them_by_default(generated):
    """The record and notebook 05's defaults agree: same arms, same cluster apart from the paths."""
    cfg = report.VerlTrainingConfig(**notebook_defaults(get_notebook("05_verl_training")))
    cluster = cfg.cluster(("<DATA_DIR>/train.parquet",), ("<DATA_DIR>/val.parquet",))
    cluster = dataclasses.replace(cluster, model_path="<MODEL_PATH>", checkpoint_dir="<CKPT_DIR>")
    assert cluster == record.paper_cluster()
    assert {a.name: a for a in cfg.arm_specs()} == record.recipe_arms()
    arms = record.recipe_arms()
    assert [(a.n_rollouts, a.prompts_per_step, a.steps) for a in arms.values()] == [(16, 512, 535), (512, 128, 191)]
    composed = {arm: configs.compose((generated / arm / "overrides.txt").read_text().splitlines()) for arm in arms}
    lr = {arm: c.actor_rollout_ref.actor.optim.lr for arm, c in composed.items()}
    assert lr["brorl"] / lr["prorl"] == pytest.approx(8**0.5)
    # a crash loses at most 3 BroRL steps (about 2.7 h on 64 GPUs), whatever save_freq the notebook asks
    assert {arm: c.trainer.save_freq for arm, c in composed.items()} == {"prorl": cluster.save_freq, "brorl": 3}
    few = dataclasses.replace(cluster, save_freq=2)
    assert configs.save_freq(arms["brorl"], few) == configs.save_freq(arms["prorl"], few) == 2
    for arm, c in composed.items():  # config.yaml is the composition of overrides.txt
        assert (generated / arm / "config.yaml").read_text().endswith(configs.to_yaml(c))


def test_readme_states_each_difference_from_the_public_prorlv2_recipes_with_its_source_file():
    readme = (record.RECORD_DIR / "README.md").read_text()
    table = readme[readme.index("## What differs from the paper") :]
    rows = {  # difference -> what its row must cite: the recipe's file and the key it reads
        "No learning-rate warmup": (
            "grpo_math_1B.yaml",
            "total_iters: 50",
            "train_ppo_ray.py",
            "--lr_warmup_ratio 0.03",
        ),
        "Rollout temperature 1.2": ("grpo_math_1B.yaml", "temperature: 1.0", "train_ppo_ray.py", "--temperature"),
        "4 PPO mini-batches per step": ("--train_batch_size 1024", "train_global_batch_size: 512", "single update"),
        "Clip-high 0.28": ("prorlv2.yaml", "0.27"),
    }
    for start, cited in rows.items():
        (row,) = [ln for ln in table.splitlines() if ln.startswith(f"| {start}")]
        assert all(c in row for c in cited), start
    assert "per issue" not in readme and "taken from ProRLv2's public recipes" not in readme


def _variables(script) -> dict[str, str]:
    """The NAME=value lines of a hand-written launch script and its profile.sh (``export`` ones included),
    quotes removed."""
    found = {}
    for line in (script.parent.parent / "profile.sh").read_text().splitlines() + script.read_text().splitlines():
        words = shlex.split(line, comments=True)
        for word in words[1:] if words[:1] == ["export"] else words:
            name, eq, value = word.partition("=")
            if eq and name.isupper():
                found[name] = value
    return found


def test_each_launch_script_runs_its_arm_as_configs_say(generated):
    """The hand-written scripts' variables and headers are the arms of configs.py, profile by profile."""
    cpu_env = profile.env(launch.CLUSTER_ENV["VERL_USE_EXTERNAL_MODULES"])
    for folder, (arm, _) in record.profile_arms().items():
        script = generated / folder / "launch.sh"
        prefix = folder[: -len(arm.name)]
        env = cpu_env if prefix == "cpu/" else launch.CLUSTER_ENV
        got = _variables(script)
        assert got == {
            "ARM": arm.name,
            "STOPS": " ".join(map(str, launch.stops(arm))),
            "RUN_DIR_DEFAULT": record.run_dir(prefix),
            **({"TENSORBOARD_ROOT": record.TENSORBOARD_ROOTS[prefix]} if prefix in record.TENSORBOARD_ROOTS else {}),
            **env,
            "RAY_ENV": " ".join(env),
        }, folder
        head = f"N={arm.n_rollouts} rollouts x {arm.prompts_per_step} prompts per step"
        assert head in script.read_text() and f"{arm.steps} RL steps" in script.read_text(), folder
        assert f"bash recipes/brorl/{folder}/launch.sh" in script.read_text(), folder
    readme = (generated / "README.md").read_text()  # the README's table of the arms, as configs.py computes it
    arms = record.recipe_arms()
    base = arms[configs.BASE_ARM]
    for name, a in arms.items():
        lr = configs.learning_rate(a, base, record.paper_cluster().base_lr)
        row = f"| {a.n_rollouts} | {a.prompts_per_step} | {a.samples_per_step} | {a.mini_batches} "
        assert f"{row}({configs.mini_batch_prompts(a)} prompts) | {lr:.4g} | {a.steps} |" in readme, name


def _fake_python(path, body=""):
    """A stand-in interpreter: records its arguments, one file per call, in $CALLS (and runs ``body``)."""
    path.write_text(
        '#!/usr/bin/env bash\nn=$(find "$CALLS" -type f | wc -l)\nprintf "%s\\n" "$@" > "$CALLS/$n"\n' + body
    )
    path.chmod(0o755)
    return path


def _calls(folder):
    return [(folder / str(i)).read_text().splitlines() for i in range(len(list(folder.iterdir())))]


def test_launch_script_takes_the_paths_from_the_environment(generated, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(generated, repo / "recipes" / "brorl")
    calls = tmp_path / "calls"
    calls.mkdir()
    fake = _fake_python(tmp_path / "python.sh", 'echo \'{"step": 0, "data": {}}\' > "$VERL_FILE_LOGGER_PATH"\n')
    script = repo / "recipes" / "brorl" / "brorl" / "launch.sh"
    env = {**os.environ, "PYTHON": str(fake), "CALLS": str(calls)}
    paths = {"MODEL_PATH": str(tmp_path / "my model"), "DATA_DIR": str(tmp_path / "data"), "CKPT_DIR": "/ckpt"}
    for name in paths:  # each variable is required
        out = subprocess.run(["bash", str(script)], env={**env, **paths, name: ""}, capture_output=True, text=True)
        assert out.returncode == 2 and f"set {name}" in out.stderr
    quoted = {**env, **paths, "MODEL_PATH": "/it's"}
    out = subprocess.run(["bash", str(script)], env=quoted, capture_output=True, text=True)
    assert out.returncode == 2 and "MODEL_PATH must hold no quotes" in out.stderr
    subprocess.run(
        ["bash", str(script), "trainer.total_training_steps=2"], env={**env, **paths}, check=True, capture_output=True
    )
    made = _calls(calls)  # one launch of verl per stop: no checkpoint is written here, so every stop runs
    assert len(made) == len(launch.stops(record.recipe_arms()["brorl"]))
    args = made[0]
    overrides = (generated / "brorl" / "overrides.txt").read_text().splitlines()
    filled = []
    for o in overrides:
        for name, value in paths.items():
            o = o.replace(f"<{name}>", value)
        filled.append(o)
    assert args[:2] == ["-m", "verl.trainer.main_ppo"] and args[2 : 2 + len(overrides)] == filled
    assert args[-1] == "trainer.total_training_steps=2"
    run_dir = repo / "data" / "runs" / "verl" / "brorl-repro" / "brorl"  # the default RUN_DIR
    assert f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH='{run_dir}/logs/segment_000.jsonl'" in args
    # TensorBoard beside the JSONL logs, in the arm's folder, for verl's logger in the Ray TaskRunner too
    assert f"+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR='{run_dir}/tensorboard'" in args
    cfg = configs.compose(filled)  # what verl receives composes, the paths filled in
    assert list(cfg.trainer.logger) == ["console", "file", "tensorboard"]  # W&B only when asked for
    assert cfg.actor_rollout_ref.model.path == paths["MODEL_PATH"]
    assert list(cfg.data.train_files) == [f"{paths['DATA_DIR']}/train.parquet"]
    assert cfg.trainer.default_local_dir == "/ckpt/brorl"
    # the run folder holds the record's config, so notebook 05 reads the logs back as the BroRL arm
    (run,) = logs.find_runs(repo / "data" / "runs" / "verl")
    assert (run.arm, run.n_rollouts, run.prompts_per_step) == ("brorl", 512, 128)


def test_evaluate_script_runs_the_papers_protocol_on_the_three_checkpoints(generated, tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()
    merge = (
        'if [[ "$2" == verl.model_merger ]]; then\n  while [[ $# -gt 0 ]]; do\n'
        '    [[ "$1" == --target_dir ]] && { mkdir -p "$2"; echo "{}" > "$2/config.json"; }\n'
        "    shift\n  done\nfi\n"
    )
    env = {
        **os.environ,
        "PYTHON": str(_fake_python(tmp_path / "python.sh", merge)),
        "CALLS": str(calls),
        "CKPT_DIR": str(tmp_path / "ckpt"),
        "REPO_ROOT": str(tmp_path),
    }
    script = generated / "evaluate.sh"
    subprocess.run(["bash", str(script)], env=env, check=True, capture_output=True)
    got = _calls(calls)
    assert [c[1] for c in got] == [
        "brorl_lib.evaluation",
        "verl.model_merger",
        "brorl_lib.evaluation",
        "verl.model_merger",
        "brorl_lib.evaluation",
    ]
    assert got[1][got[1].index("--local_dir") + 1] == f"{tmp_path}/ckpt/prorl/global_step_535/actor"
    evaluations = [eval_cli.parser().parse_args(c[2:]) for c in got if c[1] == "brorl_lib.evaluation"]
    assert [a.label for a in evaluations] == [report.BASELINE_EVAL_LABEL, "prorl-step535", "brorl-step191"]
    assert [a.model for a in evaluations] == [
        report.PRORLV2_CHECKPOINT,
        f"{tmp_path}/ckpt/merged/prorl-step535",
        f"{tmp_path}/ckpt/merged/brorl-step191",
    ]
    assert evaluations[0].revision == configs.MODEL_REVISION  # a commit, not the moving "main"
    for a in evaluations:  # Appendix D: 16 samples, T=0.6, top-p 0.95, 32k tokens, every benchmark
        assert (a.samples, a.temperature, a.top_p, a.max_tokens, a.benchmarks) == (16, 0.6, 0.95, 32768, ["all"])
        assert a.out == tmp_path / "data" / "runs" / "eval" and res.check_label(a.label)
    shutil.rmtree(calls)
    calls.mkdir()
    subprocess.run(
        ["bash", str(script), "brorl", "--limit", "5"],
        env={**env, "BRORL_STEP": "100"},
        check=True,
        capture_output=True,
    )
    merged, evaluated = _calls(calls)  # merged again: step 100 is another checkpoint
    assert merged[1] == "verl.model_merger" and evaluated[1] == "brorl_lib.evaluation"
    parsed = eval_cli.parser().parse_args(evaluated[2:])
    assert parsed.label == "brorl-step100" and parsed.limit == 5
    out = subprocess.run(["bash", str(script), "prorl"], env={**env, "CKPT_DIR": ""}, capture_output=True, text=True)
    assert out.returncode != 0 and "set CKPT_DIR" in out.stderr


def _write_eval(results_dir, label, scores):
    """Per-sample results of ``label`` on aime24 in the harness's layout: ``scores`` = instance -> samples."""
    rows = [
        {
            "checkpoint": label,
            "benchmark": "aime24",
            "domain": "math",
            "task": "aime24",
            "instance_id": iid,
            "sample": j,
            "score": s,
            "correct": s == 1.0,
            "response_tokens": 10,
            "finish_reason": "stop",
        }
        for iid, samples in scores.items()
        for j, s in enumerate(samples)
    ]
    res.append_rows(res.results_path(results_dir, label, "aime24"), rows)
    res.write_run_info(results_dir, label, {})


def test_paired_test_compares_the_latest_checkpoint_of_each_arm(tmp_path):
    assert report.latest_arm_checkpoints(["brorl-step99", "brorl-step100", "prorl-step5", "tiny", "brorl-stepx"]) == {
        "prorl": "prorl-step5",
        "brorl": "brorl-step100",
    }  # by step number, not by name
    rng = np.random.default_rng(3)
    prorl = {f"i{k}": rng.integers(0, 2, 4).astype(float).tolist() for k in range(40)}
    brorl = {k: np.maximum(v, rng.integers(0, 2, 4)).tolist() for k, v in prorl.items()}  # never below ProRL
    del brorl["i0"]  # an instance only ProRL was evaluated on
    _write_eval(tmp_path, "prorl-step535", prorl)
    _write_eval(tmp_path, "brorl-step191", brorl)
    _write_eval(tmp_path, "brorl-step107", {k: [0.0] * 4 for k in brorl})  # an earlier checkpoint: not used
    table = report.paired_test_table(tmp_path)
    assert table["source"].tolist() == ["reported", "evaluated"]
    reported, mine = table.iloc[0], table.iloc[1]
    assert (reported.mean_difference, reported.t, reported.p, reported.n) == (0.0033, 4.84, 6.5e-7, 10000)
    assert (mine.treatment, mine.control, mine.n, mine.n_unpaired) == ("brorl-step191", "prorl-step535", 39, 1)
    keys = sorted(brorl)
    ref = sps.ttest_rel([np.mean(brorl[k]) for k in keys], [np.mean(prorl[k]) for k in keys], alternative="greater")
    assert mine.t == pytest.approx(ref.statistic) and mine.p == pytest.approx(ref.pvalue) and mine.t > 0
    assert mine.mean_difference == pytest.approx(np.mean([np.mean(brorl[k]) - np.mean(prorl[k]) for k in keys]))
    assert report.evaluated_arms_note(tmp_path) == (
        f"paired test of brorl-step191 against prorl-step535 (evaluated under {tmp_path}) beside the reported one"
    )


def test_without_both_arms_evaluated_only_the_reported_test_is_shown(tmp_path):
    empty = tmp_path / "none"
    assert report.paired_test_table(empty)["source"].tolist() == ["reported"]
    assert report.evaluated_arms_note(empty).startswith(f"no evaluated checkpoints under {empty}")
    _write_eval(tmp_path, "brorl-step191", {"i1": [1.0, 0.0]})
    _write_eval(tmp_path, report.BASELINE_EVAL_LABEL, {"i1": [0.0, 0.0]})
    assert report.paired_test_table(tmp_path)["source"].tolist() == ["reported"]
    note = report.evaluated_arms_note(tmp_path)
    assert note.startswith("2 evaluated checkpoint(s)") and "none of arm(s) ['prorl']" in note
