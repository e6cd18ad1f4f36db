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
from brorl_lib.verl_recipe import configs, launch, report, smoke
from brorl_lib.verl_recipe.cpu import profile

RECORD_DIR = REPO_ROOT / "recipes" / "brorl"
COMMAND = "python -m brorl_lib.verl_recipe.record"
EXECUTABLE = tuple(f"{d}{a}/launch.sh" for d in ("", "cpu/", "smoke/") for a in ("prorl", "brorl")) + ("evaluate.sh",)
VARIABLES = {  # environment variable -> what it holds; <NAME> in overrides.txt and config.yaml
    "MODEL_PATH": f"local folder of the starting checkpoint, {report.PRORLV2_CHECKPOINT} at commit "
    f"{configs.MODEL_REVISION[:12]}",
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
SMOKE_NOTE = (
    "# The smoke profile: this arm's committed overrides (../../<arm>/overrides.txt) plus the delta of\n"
    "# brorl_lib/verl_recipe/smoke.py: one node, the paper's N and prompts per step, short responses, two\n"
    "# steps. Run it first on real hardware (about two node-hours); `python -m brorl_lib.verl_recipe.smoke`\n"
    "# kills it after step 1, resumes it and prints seconds per step.\n#\n"
)
CPU_SETUP = (
    "# Before the first launch: `make install` (verl runs on this machine; the one GPU is a logical Ray\n"
    "# resource, the work runs on the CPU through the plugin brorl_lib/verl_recipe/cpu/plugin.py). Then:\n"
)


# What the recipe does differently from the paper: (difference, effect, what changes it); README table.
DIFFERENCES = (
    (
        "Training data: math (DeepScaleR) plus Reasoning Gym by default; code, STEM and instruction following "
        "only from local files (`brorl_lib/verl_recipe/domains.py` converts them)",
        "ProRLv2 trained on five domains; with fewer, scores on the missing ones drift",
        "notebook 05's `math_dataset`, `code_dataset`, `stem_dataset` parameters",
    ),
    (
        "verl's sync dynamic sampling over-generates: each dropped group earns two refills, and the groups still "
        "in flight when the batch is full are generated, then discarded",
        "generated samples and hours per step exceed Table 1's accounting (kept ÷ pass rate); the logs report "
        "both (`samples`, `samples_table1`)",
        "nothing in verl 0.9.1 (`algorithm.filter_groups.max_inflight_gen_batches`, 1 by default, bounds the "
        "groups in flight); compare arms on `samples_table1`",
    ),
    (
        "No reference-policy resets, no length penalty",
        "ProRLv2 reset the reference every 200–500 steps and cycled a cosine length penalty; without them the KL "
        "to the start model grows and responses may lengthen",
        "not in verl 0.9.1's trainer: a reset is a relaunch with `actor_rollout_ref.model.path` set to a merged "
        "checkpoint",
    ),
    (
        f"The start model at commit `{configs.MODEL_REVISION}`",
        '"main" moves; the commit is the ProRLv2 3K model as a third-party registry records it, not checked '
        "against the model card",
        "`--revision` of the download and `configs.MODEL_REVISION`",
    ),
    (
        "Checkpoints only at the Table 1 stops and the newest",
        "a crash loses at most `trainer.save_freq` steps; other steps cannot be evaluated",
        "`trainer.max_actor_ckpt_to_keep`, `trainer.save_freq`",
    ),
    (
        "The driver pads every per-sample field to N·P × (prompt + response) tokens: 65,536 × 18,432 for BroRL",
        "several GB per field: a small head node runs out of memory at the first step",
        "run the driver on a large node; preflight checks it",
    ),
    (
        "The paper's omitted values (learning rate, clipping, KL, temperature, mini-batches)",
        "taken from ProRLv2's public recipes, each named in `brorl_lib/verl_recipe/configs.py`",
        "those constants",
    ),
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


def arm_files(
    arm: configs.Arm, cluster: configs.Cluster, ov: list[str], folder: str, run_dir: str, what: str, **script
) -> dict[str, str]:
    """``launch.sh``, ``overrides.txt`` and ``config.yaml`` of one arm in ``folder`` (relative to ``recipes/brorl``),
    the overrides composed by Hydra and checked by verl's ``validate_config``; ``script``: launch-script options."""
    composed = configs.compose(ov)
    configs.validate(composed)
    names = ", ".join(f"<{v}>" for v in VARIABLES)
    record = RECORD_DIR.relative_to(REPO_ROOT).as_posix()
    launch_sh = launch.record_script_text(
        arm, cluster, ov, VARIABLES, script=f"{record}/{folder}/launch.sh", run_dir=run_dir, origin=f"`{COMMAND}`",
        **script,
    )  # fmt: skip
    return {
        f"{folder}/launch.sh": launch_sh,
        f"{folder}/overrides.txt": "\n".join(ov) + "\n",
        f"{folder}/config.yaml": (
            f"# verl 0.9.1 ppo_trainer.yaml composed by Hydra with overrides.txt ({what}) and checked by verl's\n"
            f"# validate_config; {names} stand for the environment variables launch.sh reads.\n"
            f"# Generated by `{COMMAND}`; re-generate rather than edit.\n" + configs.to_yaml(composed)
        ),
    }


def _run_dir(name: str) -> str:
    return (report.RUNS_DIR / name).relative_to(REPO_ROOT).as_posix()


def record_files() -> dict[str, str]:
    """Path relative to ``recipes/brorl`` -> text, for every file of the record (composes every arm: seconds)."""
    arms, cluster = paper_arms(), paper_cluster()
    base = arms[configs.BASE_ARM]
    run_dir = _run_dir(cluster.run_name)
    files: dict[str, str] = {"README.md": readme(arms, cluster, run_dir)}
    cpu_node = configs.Cluster(**{**cluster.__dict__, "nnodes": 1, "n_gpus_per_node": 1})
    smoke_settings = smoke.SmokeSettings()
    smoke_node = configs.Cluster(
        **{**cluster.__dict__, "nnodes": smoke_settings.nnodes, "n_gpus_per_node": smoke_settings.n_gpus_per_node}
    )
    cpu_env = profile.env(launch.CLUSTER_ENV["VERL_USE_EXTERNAL_MODULES"])
    for name, arm in arms.items():
        ov = configs.overrides(arm, base, cluster)
        files |= arm_files(arm, cluster, ov, name, run_dir, "the cluster profile", notes=LAYOUT_NOTE)
        files |= arm_files(
            profile.cpu_arms(CPU_SETTINGS.steps)[name], cpu_node, cpu_arm_overrides(name), f"cpu/{name}",
            _run_dir(CPU_SETTINGS.run_name), "the cpu profile", notes=CPU_NOTE, env=cpu_env, setup=CPU_SETUP,
        )  # fmt: skip
        files |= arm_files(
            smoke.arm(name, smoke_settings), smoke_node, smoke.overrides(ov, smoke_settings), f"smoke/{name}",
            _run_dir(smoke.RUN_NAME), "the smoke profile", notes=SMOKE_NOTE,
        )  # fmt: skip
    files["evaluate.sh"] = evaluate_script(arms, RECORD_DIR.relative_to(REPO_ROOT).as_posix())
    return files


CPU_SETTINGS = profile.CpuSettings()  # the committed cpu profile's length


def cpu_arm_overrides(name: str, settings: profile.CpuSettings = CPU_SETTINGS) -> list[str]:
    """The cpu profile's overrides of arm ``name``: the recorded arm's overrides plus the CPU delta."""
    arms, cluster = paper_arms(), paper_cluster()
    return profile.overrides(name, configs.overrides(arms[name], arms[configs.BASE_ARM], cluster), settings)


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
#   baseline  {report.PRORLV2_CHECKPOINT} at commit {configs.MODEL_REVISION[:12]}, label {report.BASELINE_EVAL_LABEL}
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
    baseline) evaluate {report.PRORLV2_CHECKPOINT} {report.BASELINE_EVAL_LABEL} --revision {configs.MODEL_REVISION} ;;
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
    differences = "\n".join(f"| {d} | {e} | {c} |" for d, e, c in DIFFERENCES)
    stop_text = "; ".join(f"{report.ARM_LABELS[n]} {', '.join(map(str, launch.stops(a)))}" for n, a in arms.items())
    smoke_settings = smoke.SmokeSettings()
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
{cluster.save_freq} steps and at each of the arm's Table 1 steps (kept; see below).

## Files

| file | what |
|---|---|
| `<arm>/launch.sh` | `python -m verl.trainer.main_ppo` with the arm's Hydra overrides; re-run it to resume |
| `<arm>/overrides.txt` | those overrides, one a line |
| `<arm>/config.yaml` | verl's `ppo_trainer.yaml` composed with them by Hydra and checked by verl's `validate_config` |
| `evaluate.sh` | the paper's evaluation protocol (Appendix D) on the starting checkpoint and both arms' checkpoints |
| `smoke/<arm>/` | the same three files for the smoke profile: one node, the paper's batch, two steps (step 5 below) |
| `cpu/<arm>/` | the same three files for the cpu profile (below): verl's trainer on a CPU at toy scale |

Paths differ between machines, so they are environment variables; the overrides and configs write
them as `<NAME>`:

| variable | what |
|---|---|
{variables}
| `RUN_DIR` | optional: each arm logs to `$RUN_DIR/<arm>/logs/segment_NNN.jsonl` (default `{run_dir}`) |

## From data to evaluation

1. On every node, with this repository on a filesystem all nodes see: `pip install -e ".[gpu]"` (vLLM
   0.24.0, verl with its vLLM extra, and flash-attn {configs.FLASH_ATTN_VERSION}, the version verl 0.9.1 pins in
   its own `fsdp` extra: verl loads the model with `flash_attention_2` and the recipe removes padding through
   flash-attn's varlen kernels), and the start model at a fixed commit:
   `huggingface-cli download {report.PRORLV2_CHECKPOINT} --revision {configs.MODEL_REVISION}
   --local-dir /shared/prorlv2-3k`.
2. Training data: notebook 05 with `work_dir` set writes `<work_dir>/<run_name>/data/train.parquet` and
   `val.parquet` (`papermill notebooks/05_verl_training.ipynb build/notebooks/05.ipynb -k python3 --cwd notebooks
   -p work_dir /shared/brorl -p math_dataset agentica-org/DeepScaleR-Preview-Dataset -p rg_train_per_task 2000
   -p rg_val_per_task 100`).
3. Ray: `ray start --head --port=6379` on the head node, `ray start --address=<head-ip>:6379` on the others.
4. Preflight, on the head node (seconds): `python -m brorl_lib.verl_recipe.preflight` with the variables
   below set. It builds verl's tokenizer path from `MODEL_PATH`'s tokenizer, imports flash-attn, vLLM, Ray
   and TransferQueue against their pins, and checks TransferQueue's capacity against N × P, free disk against
   the checkpoints the run keeps, the driver's memory against the padded batch, the data files, the Ray
   cluster's nodes and GPUs and the model's revision; each failure names the key or package and the fix.
5. Smoke run, on one node of 8 GPUs (about two node-hours): `python -m brorl_lib.verl_recipe.smoke` runs
   `smoke/<arm>/launch.sh` (the paper's N and prompts per step, {smoke_settings.response_length}-token responses,
   {smoke_settings.steps} steps), kills it after its first checkpoint, resumes it and prints each arm's seconds
   per step and the hours they imply. Look at: the first step getting through (tokenizer, attention,
   TransferQueue, dynamic sampling, Math-Verify in the reward worker), `actor/ppo_kl` and `actor/pg_clipfrac`
   in the log (non-zero from the second PPO mini-batch), the resume starting at step 2, and memory.
6. On the head node, one arm after the other, each on the whole cluster:

   ```bash
   export MODEL_PATH=/shared/prorlv2-3k DATA_DIR=/shared/brorl/brorl-repro/data CKPT_DIR=/shared/brorl/checkpoints
   bash recipes/brorl/prorl/launch.sh
   bash recipes/brorl/brorl/launch.sh
   ```

   Each script trains in stops at its arm's Table 1 steps ({stop_text}), one launch of verl
   each, so that the checkpoint each stop ends with is kept (`trainer.max_actor_ckpt_to_keep={configs.MAX_CKPT_TO_KEEP}`
   removes the others of the same launch; about 21 GB each). Re-running a script skips the stops already
   checkpointed, resumes from the arm's newest checkpoint and logs to a new segment file. Each arm's folder
   under `{run_dir}/` gets its `config.yaml` and logs; notebook 05 turns them into Figures 1 and 4 and
   Table 1 beside the paper (`python -m brorl_lib run 05_verl_training --profile paper`). One after the
   other the arms take about {sum(hours.values()):g} h on 64 H100s (Table 1). Side by side on two halves of the
   cluster (`trainer.nnodes=4` each, two Ray clusters) both finish together, after about twice the slower
   arm's hours if the step time scales linearly (our estimate), and meet the same cluster conditions; one
   after the other, the first arm's results come sooner.
7. Evaluation with the paper's protocol (16 samples per instance, temperature 0.6, top-p 0.95, 32k
   tokens): `CKPT_DIR=/shared/brorl/checkpoints bash recipes/brorl/evaluate.sh` evaluates the starting
   checkpoint (label `{report.BASELINE_EVAL_LABEL}`) and each arm's last checkpoint (labels
   {labels}) into `data/runs/eval/`; `PRORL_STEP=225` or `BRORL_STEP=107` (or 134) evaluates an
   intermediate Table 1 row. Notebook 05 then fills Tables 3–5 and runs
   the paper's paired one-tailed t-test (§4.2.2) of BroRL against ProRL on per-instance pass@1.

What every launch script carries beyond the paper's settings, each because verl 0.9.1 would otherwise fail
or differ:

- `VERL_USE_EXTERNAL_MODULES={launch.FALLBACK_MODULE}`, loaded by every verl process: verl picks
  its Qwen continuous-token builder from `config.json`'s `model_type` (`qwen2`), and that builder requires
  ChatML's `<|im_end|>`, which the DeepSeek-R1-distilled start model's tokenizer lacks (verl issue #7637); the
  fallback gives such a tokenizer verl's DeepSeek builder.
- `trainer.v1.sampler.custom_sampler` = `brorl_lib.verl_recipe.guard.BoundedReplayBuffer`, loaded in the
  trainer only through verl's own hook: verl ignores `algorithm.filter_groups.max_num_gen_batches` and would
  refill forever when every group is all right or all wrong; the sampler stops such a step after
  {configs.MAX_GEN_BATCHES} generation rounds with an error that says why.
- `transfer_queue.backend.SimpleStorage.total_storage_size=null`: verl's default cap of 100,000 samples is
  below a BroRL step's peak (65,536 kept samples plus the groups in flight while it drains); a set cap must be
  at least {configs.STORAGE_MULTIPLE} × N × P.

## What differs from the paper, and what it costs

| difference | effect | what changes it |
|---|---|---|
{differences}

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
