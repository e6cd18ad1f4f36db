"""The committed record of the paper's two arms, ``recipes/brorl/``, kept as verl's own recipes keep theirs.

``python -m brorl_lib.verl_recipe.record`` writes it; ``--check`` compares instead and names every file
that differs (tests/test_verl_record.py does the same). The record holds the paper's arms (§4.2.1) with
this library's settings (``configs.py``): ProRL N=16 x 512 prompts for 535 steps and BroRL N=512 x 128
prompts for 191 steps (the steps of each arm's last Table 1 row), the same PPO mini-batch count, BroRL's
learning rate scaled by sqrt(8), on the paper's 64 GPUs laid out as 8 nodes x 8 (the paper states 64 H100s
but no node layout: 8 x 8 is our reading). Nothing in it depends on the machine: the model, data and
checkpoint folders are environment variables (``VARIABLES``), written ``<NAME>`` in the Hydra overrides
and the composed config, ``${NAME}`` in the scripts.

Files (``record_files``): ``README.md``; per arm ``<arm>/launch.sh`` (the Ray launch), ``<arm>/overrides.txt``
(the Hydra overrides it passes) and ``<arm>/config.yaml`` (verl's ``ppo_trainer.yaml`` composed with them by
Hydra and checked by verl's ``validate_config``); ``evaluate.sh`` (the paper's Appendix D protocol on the
starting checkpoint and both arms' last checkpoints).

Notebook 05 still writes run-specific scripts, with the machine's paths, under ``build/verl/`` (or
``data/runs/verl/`` when it launches); this record is what the README points at.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from brorl_lib.core import atomic
from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.evaluation import protocol
from brorl_lib.paper import reported as paper
from brorl_lib.verl_recipe import configs, launch, report
from brorl_lib.verl_recipe.cpu import profile

RECORD_DIR = REPO_ROOT / "recipes" / "brorl"
COMMAND = "python -m brorl_lib.verl_recipe.record"
EXECUTABLE = ("prorl/launch.sh", "brorl/launch.sh", "cpu/prorl/launch.sh", "cpu/brorl/launch.sh", "evaluate.sh")
VARIABLES = {  # environment variable -> what it holds; <NAME> in overrides.txt and config.yaml
    "MODEL_PATH": f"local folder of the starting checkpoint, {report.PRORLV2_CHECKPOINT} at revision main",
    "DATA_DIR": "folder holding train.parquet and val.parquet (notebook 05 writes them to <work_dir>/<run_name>/data)",
    "CKPT_DIR": "folder for verl's checkpoints; each arm's go to $CKPT_DIR/<arm>",
}
LAYOUT_NOTE = (
    "# The paper ran on 64 H100 GPUs and does not state the node layout: 8 nodes x 8 GPUs is our reading.\n#\n"
)
CPU_NOTE = (
    "# The cpu profile: this arm's committed overrides (../../<arm>/overrides.txt) plus the CPU delta of\n"
    "# brorl_lib/verl_recipe/cpu/profile.py, for verl's own trainer on a CPU at toy scale: a test harness\n"
    "# that proves the recipe's data, reward, config, dynamic sampling, logs and resume, not a training\n"
    "# backend. MODEL_PATH is a tiny model (python -m brorl_lib.verl_recipe.cpu.run prepares one).\n#\n"
)
CPU_SETUP = (
    "# Before the first launch: `make install` (verl runs on this machine; the one GPU is a logical Ray\n"
    "# resource, the work runs on the CPU through the plugin brorl_lib/verl_recipe/cpu/plugin.py). Then:\n"
)


def paper_arms() -> dict[str, configs.Arm]:
    """The paper's arms: N and prompts per step (§4.2.1), steps of the arm's last Table 1 row, 4 mini-batches."""
    return {
        name: configs.Arm(name, n, prompts, report.paper_steps(name))
        for name, (n, prompts) in configs.PAPER_ARMS.items()
    }


def paper_cluster() -> configs.Cluster:
    """The default cluster (8 nodes x 8 GPUs) with the ``VARIABLES`` as ``<NAME>`` placeholders for paths."""
    return configs.Cluster(
        model_path="<MODEL_PATH>",
        train_files=("<DATA_DIR>/train.parquet",),
        val_files=("<DATA_DIR>/val.parquet",),
        checkpoint_dir="<CKPT_DIR>",
    )


def record_files() -> dict[str, str]:
    """Path relative to ``recipes/brorl`` -> text, for every file of the record (composes both arms: seconds)."""
    arms, cluster = paper_arms(), paper_cluster()
    base = arms[configs.BASE_ARM]
    record = RECORD_DIR.relative_to(REPO_ROOT).as_posix()
    run_dir = (report.RUNS_DIR / cluster.run_name).relative_to(REPO_ROOT).as_posix()
    names = ", ".join(f"<{v}>" for v in VARIABLES)
    files: dict[str, str] = {"README.md": readme(arms, cluster, run_dir)}
    for arm in arms.values():
        ov = configs.overrides(arm, base, cluster)
        composed = configs.compose(ov)
        configs.validate(composed)
        files[f"{arm.name}/launch.sh"] = launch.record_script_text(
            arm,
            cluster,
            ov,
            VARIABLES,
            script=f"{record}/{arm.name}/launch.sh",
            run_dir=run_dir,
            origin=f"`{COMMAND}`",
            notes=LAYOUT_NOTE,
        )
        files[f"{arm.name}/overrides.txt"] = "\n".join(ov) + "\n"
        files[f"{arm.name}/config.yaml"] = (
            "# verl 0.9.1 ppo_trainer.yaml composed by Hydra with overrides.txt and checked by verl's validate_config;"
            "\n"
            f"# {names} stand for the environment variables launch.sh reads.\n"
            f"# Generated by `{COMMAND}`; re-generate rather than edit.\n" + configs.to_yaml(composed)
        )
    files["evaluate.sh"] = evaluate_script(arms, record)
    files.update({f"cpu/{rel}": text for rel, text in cpu_files(arms, cluster, record, names).items()})
    return files


CPU_SETTINGS = profile.CpuSettings()  # the committed cpu profile's length


def cpu_arm_overrides(name: str, settings: profile.CpuSettings = CPU_SETTINGS) -> list[str]:
    """The cpu profile's overrides of arm ``name``: the recorded arm's overrides plus the CPU delta."""
    arms, cluster = paper_arms(), paper_cluster()
    return profile.overrides(name, configs.overrides(arms[name], arms[configs.BASE_ARM], cluster), settings)


def cpu_files(arms: dict[str, configs.Arm], cluster: configs.Cluster, record: str, names: str) -> dict[str, str]:
    """``<arm>/launch.sh``, ``overrides.txt`` and ``config.yaml`` of the cpu profile, relative to ``cpu/``."""
    settings = CPU_SETTINGS
    cpu_cluster = configs.Cluster(**{**cluster.__dict__, "nnodes": 1, "n_gpus_per_node": 1})
    run_dir = (report.RUNS_DIR / settings.run_name).relative_to(REPO_ROOT).as_posix()
    files = {}
    for name in arms:
        ov = cpu_arm_overrides(name, settings)
        composed = configs.compose(ov)
        configs.validate(composed)
        files[f"{name}/launch.sh"] = launch.record_script_text(
            profile.cpu_arms(settings.steps)[name],
            cpu_cluster,
            ov,
            VARIABLES,
            script=f"{record}/cpu/{name}/launch.sh",
            run_dir=run_dir,
            origin=f"`{COMMAND}`",
            notes=CPU_NOTE,
            env=profile.env(launch.GUARD_MODULE),
            setup=CPU_SETUP,
        )
        files[f"{name}/overrides.txt"] = "\n".join(ov) + "\n"
        files[f"{name}/config.yaml"] = (
            "# verl 0.9.1 ppo_trainer.yaml composed by Hydra with overrides.txt (the cpu profile) and checked by\n"
            f"# verl's validate_config; {names} stand for the environment variables launch.sh reads.\n"
            f"# Generated by `{COMMAND}`; re-generate rather than edit.\n" + configs.to_yaml(composed)
        )
    return files


def evaluate_script(arms: dict[str, configs.Arm], record: str) -> str:
    """bash: ``python -m brorl_lib.evaluation`` with the paper's protocol on the starting checkpoint and on
    each arm's checkpoint (verl's FSDP shards merged into a Hugging Face folder first)."""
    p = protocol.SamplingParams()
    steps = {name: f"${name.upper()}_STEP" for name in arms}
    cases = "\n".join(
        f'    {name}) model=$(merged {name} "{steps[name]}"); '
        f'evaluate "$model" "{report.ARM_EVAL_LABEL.format(arm=name, step=steps[name])}" ;;'
        for name in arms
    )
    defaults = "\n".join(f'{name.upper()}_STEP="${{{name.upper()}_STEP:-{arm.steps}}}"' for name, arm in arms.items())
    up = "/".join([".."] * len(Path(record).parts))
    checkpoints = "\n".join(
        f"#   {name:<8}  $CKPT_DIR/{name}/global_step_{steps[name]}/actor, label "
        f"{report.ARM_EVAL_LABEL.format(arm=name, step='<step>')} (default step {arm.steps})"
        for name, arm in arms.items()
    )
    return f"""#!/usr/bin/env bash
# BroRL companion: the paper's evaluation (Appendix D) of the starting checkpoint and of both arms'
# checkpoints: pass@1 from {p.n} samples per instance, temperature {p.temperature}, top-p {p.top_p}, responses up to
# {p.max_tokens} tokens, on the six math, four code and eleven Reasoning Gym benchmarks.
# Generated by `{COMMAND}`; re-generate rather than edit.
#
#   bash {record}/evaluate.sh [baseline] [{"] [".join(arms)}] [more arguments for python -m brorl_lib.evaluation]
#
# Without a name, all three in this order. The checkpoints and their labels in the results:
#   baseline  {report.PRORLV2_CHECKPOINT} at revision main, label {report.BASELINE_EVAL_LABEL}
#             (Table 1's Baseline: ProRLv2 after 3000 steps, the checkpoint both arms continue)
{checkpoints}
# Environment: CKPT_DIR (as for the launch scripts; needed for the arms), EVAL_DIR (results; default
# <repo>/data/runs/eval, where notebook 05 reads them for Tables 3-5 and the paired t-test of paper
# §4.2.2), MERGED_DIR (Hugging Face folders merged from verl's checkpoints; default $CKPT_DIR/merged),
# {", ".join(steps[n][1:] for n in arms)} (the step evaluated; default: the arm's last Table 1 row).
# An interrupted evaluation continues where it stopped when re-run.
set -euo pipefail
REPO_ROOT="${{REPO_ROOT:-$(cd "$(dirname "${{BASH_SOURCE[0]}}")/{up}" && pwd)}}"
EVAL_DIR="${{EVAL_DIR:-$REPO_ROOT/data/runs/eval}}"
{defaults}
PYTHON="${{PYTHON:-python3}}"
targets=()
extra=()
for a in "$@"; do
  case "$a" in
    baseline|{"|".join(arms)}) targets+=("$a") ;;
    *) extra+=("$a") ;;
  esac
done
[[ ${{#targets[@]}} -gt 0 ]] || targets=(baseline {" ".join(arms)})
cd "$REPO_ROOT"

evaluate() {{  # evaluate MODEL LABEL [arguments]: the paper's protocol, every benchmark
  local model="$1" label="$2"
  shift 2
  echo "[brorl] evaluating $label ($model) into $EVAL_DIR" >&2
  "$PYTHON" -m brorl_lib.evaluation --model "$model" --label "$label" --benchmarks all --samples {p.n} \\
    --temperature {p.temperature} --top-p {p.top_p} --max-tokens {p.max_tokens} --out "$EVAL_DIR" --no-responses \\
    "$@" ${{extra[@]+"${{extra[@]}}"}}
}}

merged() {{  # merged ARM STEP: prints the Hugging Face folder of ARM's checkpoint at STEP (merged once)
  local src="${{CKPT_DIR:?set CKPT_DIR (see the header of $0)}}/$1/global_step_$2/actor"
  local dst="${{MERGED_DIR:-$CKPT_DIR/merged}}/$1-step$2"
  if [[ ! -f "$dst/config.json" ]]; then
    "$PYTHON" -m verl.model_merger merge --backend fsdp --local_dir "$src" --target_dir "$dst" >&2
  fi
  echo "$dst"
}}

for target in "${{targets[@]}}"; do
  case "$target" in
    baseline) evaluate {report.PRORLV2_CHECKPOINT} {report.BASELINE_EVAL_LABEL} --revision main ;;
{cases}
  esac
done
"""


def readme(arms: dict[str, configs.Arm], cluster: configs.Cluster, run_dir: str) -> str:
    """README.md of the record: the arms, the files, and the commands from data to evaluation."""
    base = arms[configs.BASE_ARM]
    t1 = paper.table1_arms()
    hours = {name: float(t1.loc[t1["method"] == report.ARM_LABELS[name], "time_h"].max()) for name in arms}
    rows = "\n".join(
        f"| {report.ARM_LABELS[name]} | {a.rollouts} | {a.prompts_per_step} | {a.samples_per_step} | {a.mini_batches} "
        f"({a.mini_batch_prompts} prompts) | {configs.learning_rate(a, base, cluster.base_lr):.4g} | {a.steps} "
        f"| {hours[name]:g} |"
        for name, a in arms.items()
    )
    variables = "\n".join(f"| `{name}` | {what} |" for name, what in VARIABLES.items())
    layout = f"{cluster.nnodes} nodes × {cluster.n_gpus_per_node} GPUs"
    labels = ", ".join(f"`{report.ARM_EVAL_LABEL.format(arm=name, step=a.steps)}`" for name, a in arms.items())
    return f"""# The paper's two arms on verl 0.9.1: the record

What the ProRL and BroRL arms of the paper (§4.2.1) run, as launch scripts for a Ray cluster, like the
run scripts of verl's own recipes. Generated by `{COMMAND}` from `brorl_lib/verl_recipe/`
(`configs.py` names the source of every value the paper omits); `tests/test_verl_record.py`
regenerates it and fails when a file here differs. Re-generate rather than edit.

| arm | N | prompts / step | samples / step | PPO mini-batches | learning rate | RL steps | hours reported (Table 1) |
|---|---|---|---|---|---|---|---|
{rows}

The learning rate is {cluster.base_lr:g} for ProRL and scaled by the square root of the samples-per-step ratio
(√8) for BroRL, with the same number of PPO mini-batches per step (paper §4.2.1). The steps are those of
each arm's last Table 1 row. The cluster is the paper's 64 GPUs as {layout}: the paper states
64 H100s, not the node layout, so 8 × 8 is our reading. Validation every {cluster.test_freq} steps, a checkpoint every
{cluster.save_freq} steps and at the last one.

## Files

| file | what |
|---|---|
| `<arm>/launch.sh` | `python -m verl.trainer.main_ppo` with the arm's Hydra overrides; re-run it to resume |
| `<arm>/overrides.txt` | those overrides, one a line |
| `<arm>/config.yaml` | verl's `ppo_trainer.yaml` composed with them by Hydra and checked by verl's `validate_config` |
| `evaluate.sh` | the paper's evaluation protocol (Appendix D) on the starting checkpoint and both arms' checkpoints |
| `cpu/<arm>/` | the same three files for the cpu profile (below): verl's trainer on a CPU at toy scale |

Paths differ between machines, so they are environment variables; the overrides and configs write
them as `<NAME>`:

| variable | what |
|---|---|
{variables}
| `RUN_DIR` | optional: each arm logs to `$RUN_DIR/<arm>/logs/segment_NNN.jsonl` (default `{run_dir}`) |

## From data to evaluation

1. On every node, with this repository on a filesystem all nodes see: `pip install -e ".[gpu]"`, and
   `huggingface-cli download {report.PRORLV2_CHECKPOINT} --revision main --local-dir /shared/prorlv2-3k`.
2. Training data: notebook 05 with `work_dir` set writes `<work_dir>/<run_name>/data/train.parquet` and
   `val.parquet` (`papermill notebooks/05_verl_training.ipynb build/notebooks/05.ipynb -k python3 --cwd notebooks
   -p work_dir /shared/brorl -p math_dataset agentica-org/DeepScaleR-Preview-Dataset -p rg_train_per_task 2000
   -p rg_val_per_task 100`).
3. Ray: `ray start --head --port=6379` on the head node, `ray start --address=<head-ip>:6379` on the others.
4. On the head node, one arm after the other, each on the whole cluster:

   ```bash
   export MODEL_PATH=/shared/prorlv2-3k DATA_DIR=/shared/brorl/brorl-repro/data CKPT_DIR=/shared/brorl/checkpoints
   bash recipes/brorl/prorl/launch.sh
   bash recipes/brorl/brorl/launch.sh
   ```

   Re-running a script resumes from the arm's newest checkpoint and logs to a new segment file. Each
   arm's folder under `{run_dir}/` gets its `config.yaml` and logs; notebook 05 turns them into
   Figures 1 and 4 and Table 1 beside the paper (`python -m brorl_lib run 05_verl_training --profile paper`).
5. Evaluation with the paper's protocol (16 samples per instance, temperature 0.6, top-p 0.95, 32k
   tokens): `CKPT_DIR=/shared/brorl/checkpoints bash recipes/brorl/evaluate.sh` evaluates the starting
   checkpoint (label `{report.BASELINE_EVAL_LABEL}`) and each arm's last checkpoint (labels
   {labels}) into `data/runs/eval/`. Notebook 05 then fills Tables 3–5 and runs
   the paper's paired one-tailed t-test (§4.2.2) of BroRL against ProRL on per-instance pass@1.

Every launch script loads `brorl_lib.verl_recipe.guard` into verl's processes (`VERL_USE_EXTERNAL_MODULES`):
verl 0.9.1 ignores `algorithm.filter_groups.max_num_gen_batches` and would refill forever when every group
is all right or all wrong; the guard stops such a step after {configs.MAX_GEN_BATCHES} generation rounds with an error
that says why.

## The cpu profile: the same recipe through verl's own trainer on a CPU

`cpu/<arm>/` holds each arm's committed overrides plus a short CPU delta (`brorl_lib/verl_recipe/cpu/profile.py`:
rollout `hf`, device cpu, FSDP2, sdpa attention, toy sizes, one node with one logical GPU); a test checks that
the delta is exactly that list. `make verl-test` runs it through `python -m verl.trainer.main_ppo`: both arms
train, a killed run resumes into a new log segment, and a run whose groups are all filtered stops with the
guard's error. `make verl-cpu-run` makes the committed CPU run that notebook 05 shows as "verl on CPU". It
proves the data, reward, composed config, dynamic sampling, logs, resume, merge and evaluation together; vLLM
rollouts at 16k tokens, throughput and the paper's scores need the GPU cluster.
"""


def write_record(out_dir: str | Path = RECORD_DIR) -> list[Path]:
    """Write every file of the record under ``out_dir`` (atomically; the scripts executable)."""
    out_dir = Path(out_dir)
    written = []
    for rel, text in record_files().items():
        path = out_dir / rel
        atomic.write_text(path, text)
        if rel in EXECUTABLE:
            path.chmod(0o755)
        written.append(path)
    return written


def differences(out_dir: str | Path = RECORD_DIR) -> list[str]:
    """Files of the record under ``out_dir`` that are missing or differ from a fresh generation, and
    files there that the record does not hold (paths relative to ``out_dir``)."""
    out_dir = Path(out_dir)
    files = record_files()
    found = {p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file()}
    out = []
    for rel, text in files.items():
        path = out_dir / rel
        if rel not in found:
            out.append(f"{rel}: missing")
        elif path.read_bytes() != text.encode("utf-8"):
            out.append(f"{rel}: differs")
        elif rel in EXECUTABLE and not path.stat().st_mode & 0o111:
            out.append(f"{rel}: not executable")
    out += [f"{rel}: not part of the record" for rel in sorted(found - set(files))]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=RECORD_DIR, help="folder to write (default: recipes/brorl)")
    p.add_argument("--check", action="store_true", help="compare with a fresh generation instead of writing")
    args = p.parse_args(argv)
    if args.check:
        diff = differences(args.out)
        for line in diff:
            print(f"{args.out}/{line}", file=sys.stderr)
        if diff:
            print(f"refresh with: {COMMAND}", file=sys.stderr)
        return 1 if diff else 0
    for path in write_record(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
