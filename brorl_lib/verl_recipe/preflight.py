"""Checks before a launch of ``recipes/brorl/<arm>/launch.sh``, on the Ray head node, in seconds:
``python -m brorl_lib.verl_recipe.preflight [--arms prorl brorl] [--profile cluster|smoke|cpu] [--skip ray,gpu]``.

Inputs are the launch scripts' environment variables (MODEL_PATH, DATA_DIR, CKPT_DIR) or the flags that
override them; each arm's numbers come from its committed ``overrides.txt``. Every check returns a
``Result``; a failure names the config key or package and the fix. Exit status 1 if any check fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.models.qwen2 import parameter_count
from brorl_lib.verl_recipe import configs, data, gpu_install, start_model

COMMAND = "python -m brorl_lib.verl_recipe.preflight"
RECIPES_DIR = REPO_ROOT / "recipes" / "brorl"
PROFILES = ("cluster", "smoke", "cpu")  # cluster: recipes/brorl/<arm>; the others: recipes/brorl/<profile>/<arm>
CHECKS = (
    "data",
    "revision",
    "weights",
    "storage",
    "attention",
    "driver_memory",
    "disk",
    "tokenizer",
    "packages",
    "ray",
    "nodes",
    "gpu",
)
MODEL_ID = start_model.MODEL_ID  # as report.PRORLV2_CHECKPOINT (report imports this module)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
# module -> distribution; pins come from pyproject's [gpu] extra, requirements.lock, then verl's own extras
PACKAGES = dict(
    flash_attn="flash-attn", vllm="vllm", ray="ray", transfer_queue="TransferQueue", verl="verl", torch="torch"
)
VERL_EXTRAS = ("vllm", "flash-attn-cu130torch211")  # verl's extras behind [gpu] (flash-attn: via its fsdp extra)
GPU_INSTALL = f"{gpu_install.COMMANDS[1]}, then {gpu_install.COMMANDS[2]} (Python {gpu_install.PYTHON})"
STORAGE_KEY = "transfer_queue.backend.SimpleStorage.total_storage_size"
RMPAD_KEY, ATTN_KEY = (
    "actor_rollout_ref.model.use_remove_padding",
    "actor_rollout_ref.model.override_config.attn_implementation",
)
CKPT_BYTES_PER_PARAM = 4 + 8  # our estimate of a checkpoint: fp32 weights + Adam's two fp32 moments
RAY_TIMEOUT_S = 30  # our choice: a live cluster answers in a few seconds
RAY_ADDRESS_FILE = Path("/tmp/ray/ray_current_cluster")  # written by `ray start` (ray/_private/utils.py)
_PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([^\s;,#]+)")
_HEX40 = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Result:
    """One check's outcome: ``fix`` says what to do when ``ok`` is False."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Inputs:
    """The launch scripts' machine paths."""

    model_path: str
    data_dir: str
    ckpt_dir: str


@dataclass(frozen=True)
class ArmPlan:
    """One arm as its launch script runs it: overrides and the VERL_USE_EXTERNAL_MODULES it exports."""

    name: str
    overrides: dict[str, str]
    modules: str
    source: str  # where the two were read, for messages


def parse_overrides(lines: Iterable[str]) -> dict[str, str]:
    """``key=value`` lines as {key: value}: leading '+' dropped from keys, quotes around values removed."""
    out: dict[str, str] = {}
    for line in (s.strip() for s in lines):
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.strip().lstrip("+")] = value
    return out


def read_plan(arm: str, profile: str = "cluster") -> ArmPlan:
    """The committed overrides.txt and launch.sh of ``arm``, with its profile's profile.sh (FileNotFoundError if
    the record has no overrides.txt)."""
    folder = RECIPES_DIR / arm if profile == "cluster" else RECIPES_DIR / profile / arm
    ov = parse_overrides((folder / "overrides.txt").read_text().splitlines())
    script = folder / "launch.sh"
    text = "".join(p.read_text() for p in (folder.parent / "profile.sh", script) if p.is_file())
    found = re.search(r"^export VERL_USE_EXTERNAL_MODULES=(\S*)", text, re.M)
    return ArmPlan(arm, ov, found[1].strip("'\"") if found else "", str(script.relative_to(REPO_ROOT)))


def verl_default(key: str, file: str = "_generated_ppo_trainer.yaml") -> object:
    """``key`` in one of verl's own config files (verl/trainer/config/<file>); KeyError if absent."""
    node: object = yaml.safe_load((configs.verl_config_dir() / file).read_text())
    for part in key.split("."):
        node = node[part]  # type: ignore[index]
    return node


def setting(ov: dict[str, str], key: str) -> object:
    """An override's value as YAML reads it (numbers, booleans, null), else verl's default."""
    return yaml.safe_load(ov[key]) if key in ov else verl_default(key)


def _fail(name: str, detail: str, fix: str) -> Result:
    return Result(name, False, detail, fix)


def _gb(n: float) -> str:
    return f"{n / 1e9:.3g} GB"


def _download(revision: str) -> str:
    return f"huggingface-cli download {MODEL_ID} --revision {revision} --local-dir <MODEL_PATH>"


# --- checks ---
def check_data(data_dir: str) -> Result:
    """DATA_DIR's train.parquet and val.parquet: present, readable, in verl's schema, not empty."""
    fix = "DATA_DIR must hold train.parquet and val.parquet (notebook 05 writes them to <work_dir>/<run_name>/data)"
    if not data_dir:
        return _fail("data", "DATA_DIR is not set", fix)
    rows = []
    for name in ("train.parquet", "val.parquet"):
        try:
            df = data.read_parquet(Path(data_dir) / name)  # columns data_source, prompt, ability, reward_model, ...
        except (OSError, ValueError) as err:  # pyarrow's errors derive from these
            return _fail("data", f"DATA_DIR={data_dir}: {err}", fix)
        if df.empty:
            return _fail("data", f"DATA_DIR={data_dir}: {name} has no rows", fix)
        rows.append(f"{name} {len(df)} rows")
    return Result("data", True, ", ".join(rows))


def downloaded_revisions(folder: Path) -> set[str]:
    """Commits the folder says it holds: huggingface_hub's --local-dir metadata, or an HF cache snapshot path."""
    meta = folder / ".cache" / "huggingface" / "download"
    found = {f.read_text().split("\n", 1)[0].strip() for f in meta.rglob("*.metadata")} if meta.is_dir() else set()
    resolved = folder.resolve()
    if not found and resolved.parent.name == "snapshots" and _HEX40.fullmatch(resolved.name):
        found = {resolved.name}
    return found


def check_revision(model_path: str) -> Result:
    """MODEL_PATH holds the pinned commit ``configs.MODEL_REVISION`` (when the folder says which it holds)."""
    pinned = configs.MODEL_REVISION
    if not _HEX40.fullmatch(pinned):
        return _fail("revision", f"configs.MODEL_REVISION={pinned!r}: not a 40-hex commit", f"pin {MODEL_ID}'s")
    found = downloaded_revisions(Path(model_path).expanduser()) if model_path else set()
    if not found:
        return Result("revision", True, f"pinned {pinned}; the folder does not say its revision: {_download(pinned)}")
    if found != {pinned}:
        return _fail("revision", f"MODEL_PATH={model_path} holds {sorted(found)}, pinned {pinned}", _download(pinned))
    return Result("revision", True, f"MODEL_PATH holds the pinned {pinned}")


def check_weights(model_path: str) -> Result:
    """MODEL_PATH's weight files by content: their SHA-256 against ``start_model.WEIGHT_SHA256`` (says plainly when
    none is recorded) and their tensors against config.json (``start_model.check_structure``)."""
    if not model_path or not Path(model_path).expanduser().is_dir():
        return _fail("weights", f"MODEL_PATH={model_path!r} is not a folder", _download(configs.MODEL_REVISION))
    folder = Path(model_path).expanduser()
    ok, detail = start_model.compare(folder)
    shaped, structure = start_model.check_structure(folder)
    detail = f"{detail}; structure: {structure}"
    if ok and shaped:
        return Result("weights", True, detail)
    return _fail("weights", detail, _download(configs.MODEL_REVISION))


def check_storage(plan: ArmPlan) -> Result:
    """TransferQueue's capacity holds a step: null, or at least configs.STORAGE_MULTIPLE x N x P samples."""
    name, ov = f"storage[{plan.name}]", plan.overrides
    n, p = int(setting(ov, "actor_rollout_ref.rollout.n")), int(setting(ov, "data.train_batch_size"))
    default = verl_default(STORAGE_KEY.partition(".")[2], "transfer_queue/transfer_queue.yaml")  # verl's own
    size, source = (yaml.safe_load(ov[STORAGE_KEY]), "") if STORAGE_KEY in ov else (default, " (verl's default)")
    if size is None:
        return Result(name, True, f"{STORAGE_KEY}=null: no cap")
    k, need = configs.STORAGE_MULTIPLE, configs.STORAGE_MULTIPLE * n * p
    fix = f"{STORAGE_KEY}=null (no cap) or >= {need} in the arm's overrides"
    if size < n * p:
        return _fail(name, f"{STORAGE_KEY}={size}{source} < N x P = {n} x {p} = {n * p}: one step does not fit", fix)
    if size < need:
        return _fail(name, f"{STORAGE_KEY}={size}{source} < {k} x N x P = {need} (our sizing rule)", fix)
    return Result(name, True, f"{STORAGE_KEY}={size}{source} >= {k} x N x P = {need}")


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except (ImportError, OSError, RuntimeError):  # a CUDA build can fail with OSError on a broken driver
        return False
    return True


def check_attention(plan: ArmPlan) -> Result:
    """use_remove_padding with flash_attention_2 (verl's default, verl/workers/config/model.py) needs flash_attn."""
    name, ov = f"attention[{plan.name}]", plan.overrides
    rmpad, attn = setting(ov, RMPAD_KEY), yaml.safe_load(ov.get(ATTN_KEY, "flash_attention_2"))
    if not rmpad or attn != "flash_attention_2":
        return Result(name, True, f"use_remove_padding={rmpad}, attn_implementation={attn}: flash_attn not needed")
    if _importable("flash_attn"):
        return Result(name, True, "use_remove_padding=true with flash_attention_2; flash_attn imports")
    fix = f"{GPU_INSTALL}, or +{ATTN_KEY}=sdpa and {RMPAD_KEY}=false"
    return _fail(name, f"{RMPAD_KEY}=true with flash_attention_2, but flash_attn does not import", fix)


def check_driver_memory(plan: ArmPlan, available: int | None = None) -> Result:
    """The driver's padded batch against this node's available memory."""
    import psutil

    name, ov = f"driver_memory[{plan.name}]", plan.overrides
    n, p = int(setting(ov, "actor_rollout_ref.rollout.n")), int(setting(ov, "data.train_batch_size"))
    length = int(setting(ov, "data.max_prompt_length")) + int(setting(ov, "data.max_response_length"))
    # Our estimate: each per-sample field padded to [N*P x (prompt + response)]; 4 int64 fields (input_ids,
    # attention_mask, position_ids, responses) and 3 fp32 ones (old and ref log-probs, advantages).
    need = n * p * length * (4 * 8 + 3 * 4)
    free = psutil.virtual_memory().available if available is None else available
    detail = f"padded batch {n} x {p} x {length} tokens ~ {_gb(need)}, {_gb(free)} available"
    if free < need:
        return _fail(name, detail, "run the driver on a node with more memory, or lower data.max_response_length")
    return Result(name, True, detail)


def kept_checkpoints(plan: ArmPlan) -> int:
    """One per stop of the launch script (``configs.segment_stops``) plus trainer.max_actor_ckpt_to_keep (null: every
    save)."""
    ov = plan.overrides
    total, freq = int(setting(ov, "trainer.total_training_steps")), int(setting(ov, "trainer.save_freq"))
    keep = setting(ov, "trainer.max_actor_ckpt_to_keep")
    return len(configs.segment_stops(plan.name, total)) + (
        int(keep) if keep is not None else (total // freq + 1 if freq > 0 else 0)
    )


def check_disk(model_path: str, ckpt_dir: str, plans: Iterable[ArmPlan]) -> Result:
    """Free space under CKPT_DIR against every arm's kept checkpoints."""
    fix = "free space under CKPT_DIR, set trainer.max_actor_ckpt_to_keep, or raise trainer.save_freq"
    if not ckpt_dir:
        return _fail("disk", "CKPT_DIR is not set", "export CKPT_DIR=<folder on a shared filesystem>")
    try:
        params = parameter_count(json.loads((Path(model_path).expanduser() / "config.json").read_text()))
    except (OSError, ValueError, KeyError) as err:
        get = _download(configs.MODEL_REVISION)
        return _fail("disk", f"MODEL_PATH={model_path}: no parameter count from config.json ({err!r})", get)
    kept = {p.name: kept_checkpoints(p) for p in plans}
    need = sum(kept.values()) * params * CKPT_BYTES_PER_PARAM
    where = Path(ckpt_dir).expanduser().absolute()
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    counts = ", ".join(f"{k} {v}" for k, v in kept.items())
    detail = (
        f"{params:,} parameters x {CKPT_BYTES_PER_PARAM} B = {_gb(params * CKPT_BYTES_PER_PARAM)} per checkpoint, "
        f"kept: {counts}; needs {_gb(need)}, {_gb(free)} free under {where}"
    )
    return Result("disk", True, detail) if free >= need else _fail("disk", detail, fix)


def check_tokenizer(model_path: str, plans: Iterable[ArmPlan]) -> Result:
    """MODEL_PATH's tokenizer with a chat template, verl's continuous-token builder through the fallback, and
    the fallback module listed in every launch script's VERL_USE_EXTERNAL_MODULES."""
    folder, where = Path(model_path).expanduser(), f"MODEL_PATH={model_path!r}"
    get = _download(configs.MODEL_REVISION)
    if not model_path or not folder.is_dir():
        return _fail("tokenizer", f"{where} is not a folder", get)
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        return _fail("tokenizer", f"{where} holds no tokenizer files ({', '.join(TOKENIZER_FILES)})", get)
    from transformers import AutoTokenizer

    from brorl_lib.verl_recipe import tokenizer_fallback

    try:
        model_type = json.loads((folder / "config.json").read_text()).get("model_type")
        tok = AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError, KeyError) as err:
        return _fail("tokenizer", f"{where}: the tokenizer or config.json does not load ({err})", get)
    if not getattr(tok, "chat_template", None):
        return _fail("tokenizer", f"{where}: the tokenizer has no chat template (verl applies it to every prompt)", get)
    try:  # as verl's agent loop does (verl/experimental/agent_loop/agent_loop.py), with the fallback
        builder = tokenizer_fallback.build_builder(tok, model_type)
    except ValueError as err:
        return _fail("tokenizer", f"{where}, model_type={model_type!r}: no continuous-token builder ({err})", get)
    missing = [p.source for p in plans if tokenizer_fallback.MODULE not in p.modules.split(",")]
    fix = "add it to launch.CLUSTER_ENV and re-generate: python -m brorl_lib.verl_recipe.record"
    if missing:
        return _fail(
            "tokenizer", f"{', '.join(missing)}: VERL_USE_EXTERNAL_MODULES lacks {tokenizer_fallback.MODULE}", fix
        )
    return Result("tokenizer", True, f"{type(tok).__name__}, model_type={model_type}, {type(builder).__name__}")


def _norm(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def pins() -> dict[str, str]:
    """Pinned versions by normalised distribution name: pyproject's [gpu] extra, requirements.lock, verl's extras."""
    specs = list(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"])
    specs += (REPO_ROOT / "requirements.lock").read_text().splitlines()
    try:
        specs += [r for r in importlib.metadata.requires("verl") or [] if any(f'"{e}"' in r for e in VERL_EXTRAS)]
    except importlib.metadata.PackageNotFoundError:
        pass
    found: dict[str, str] = {}
    for m in filter(None, (_PIN.match(s.strip()) for s in specs)):
        found.setdefault(_norm(m[1]), m[2])
    return found


def check_packages() -> Result:
    """Each package imports and matches its pin (local tags such as +cu130 ignored)."""
    pinned, rows, bad = pins(), [], []
    for module, dist in PACKAGES.items():
        pin = pinned.get(_norm(dist))
        try:
            version = importlib.metadata.version(dist) if _importable(module) else None
        except importlib.metadata.PackageNotFoundError:
            version = None
        if version is None or (pin and version.split("+")[0] != pin):
            bad.append(module)
        rows.append(f"{module} {version or 'MISSING'}" + (f" (pin {pin})" if pin else " (no pin)"))
    detail = ("bad: " + ", ".join(bad) + "; " if bad else "") + ", ".join(rows)
    return _fail("packages", detail, f"{GPU_INSTALL} on every node") if bad else Result("packages", True, detail)


_RAY_PROBE = (
    "import json, ray; ray.init(address='auto', log_to_driver=False, logging_level='ERROR'); "
    "print(json.dumps([sum(n['Alive'] for n in ray.nodes()), ray.cluster_resources().get('GPU', 0)]))"
)


def check_ray(nnodes: int, gpus_per_node: int, address_file: Path = RAY_ADDRESS_FILE) -> Result:
    """A running Ray cluster with trainer.nnodes alive nodes and nnodes x n_gpus_per_node GPUs; never hangs."""
    start = "ray start --head --port=6379 here, then ray start --address=<head-ip>:6379 on every other node"
    if importlib.util.find_spec("ray") is None:
        return _fail("ray", "ray is not installed", GPU_INSTALL)
    if not os.environ.get("RAY_ADDRESS") and not address_file.is_file():
        if nnodes == 1:
            return Result("ray", True, "no Ray cluster running; with trainer.nnodes=1 verl starts a local one")
        return _fail("ray", f"no Ray cluster here (no RAY_ADDRESS, no {address_file}); trainer.nnodes={nnodes}", start)
    try:  # in a child process, so that a stale address cannot hang this one
        out = subprocess.run(
            [sys.executable, "-c", _RAY_PROBE], capture_output=True, text=True, timeout=RAY_TIMEOUT_S, check=True
        )
        nodes, gpus = json.loads(out.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return _fail("ray", f"ray.init(address='auto') did not answer in {RAY_TIMEOUT_S} s", f"ray stop; {start}")
    except (subprocess.CalledProcessError, ValueError, IndexError) as err:
        last = (getattr(err, "stderr", "") or str(err)).strip().splitlines()[-1:]
        return _fail("ray", f"ray.init(address='auto') failed: {' '.join(last)}", start)
    want = nnodes * gpus_per_node
    detail = f"{nodes} alive node(s), {gpus:g} GPU(s); trainer.nnodes x n_gpus_per_node = {nnodes} x {gpus_per_node}"
    if nodes < nnodes or gpus < want:
        return _fail("ray", detail, f"{start}; or lower trainer.nnodes")
    return Result("ray", True, detail)


NODE_CHECK_COMMAND = "python -m brorl_lib.verl_recipe.node_check"  # the per-node check (node_check.py)
NODE_CHECK_TIMEOUT_S = (
    300  # our choice: a node imports transformers and verl and loads a tokenizer in well under a minute
)


def check_nodes(
    inputs: Inputs, plans: list[ArmPlan], nnodes: int, gpus_per_node: int, device: str = "cuda",
    address_file: Path = RAY_ADDRESS_FILE, timeout_s: float = NODE_CHECK_TIMEOUT_S,
) -> list[Result]:  # fmt: skip
    """One task on every node of the running Ray cluster (``node_check``, in a child process that cannot hang this
    one): a result per node, named by host and IP, failing with what is missing there; a node silent for
    ``timeout_s`` seconds fails as not answering."""
    if not os.environ.get("RAY_ADDRESS") and not address_file.is_file():
        if nnodes == 1:
            return [Result("nodes", True, "no Ray cluster running; with trainer.nnodes=1 the checks above are its")]
        return [_fail("nodes", f"no Ray cluster to check (trainer.nnodes={nnodes})", "see the ray check")]
    command = [sys.executable, "-m", "brorl_lib.verl_recipe.node_check", "--model-path", inputs.model_path]
    command += ["--data-dir", inputs.data_dir, "--ckpt-dir", inputs.ckpt_dir]
    command += ["--device", device, "--gpus-per-node", str(gpus_per_node), "--timeout", str(timeout_s)]
    try:
        out = subprocess.run(
            command, input=json.dumps([dataclasses.asdict(p) for p in plans]), capture_output=True, text=True,
            timeout=timeout_s + RAY_TIMEOUT_S, check=True,
        )  # fmt: skip
        rows = json.loads(out.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return [_fail("nodes", f"{NODE_CHECK_COMMAND} did not end in {timeout_s + RAY_TIMEOUT_S:.0f} s", "")]
    except (subprocess.CalledProcessError, ValueError, IndexError) as err:
        last = (getattr(err, "stderr", "") or str(err)).strip().splitlines()[-1:]
        return [_fail("nodes", f"{NODE_CHECK_COMMAND} failed: {' '.join(last)}", "see the ray check")]
    results = [Result(**row) for row in rows]
    if len(results) < nnodes:
        results.append(_fail("nodes", f"{len(results)} node(s) answered, trainer.nnodes={nnodes}", "see the ray check"))
    return results


def check_gpu(gpus_per_node: int, device: str = "cuda", node: gpu_install.NodeGpus | None = None) -> Result:
    """This node's CUDA GPUs against trainer.n_gpus_per_node (none needed with trainer.device=cpu), with the NVIDIA
    driver's version against the minimum of the CUDA 13.0 wheels, and why when torch sees too few GPUs."""
    if device == "cpu":
        return Result("gpu", True, "trainer.device=cpu: no GPU needed")
    node = node or gpu_install.node_gpus()
    driver = node.driver or f"none ({node.driver_note})"
    detail = (
        f"this node has {node.count} CUDA GPU(s), trainer.n_gpus_per_node={gpus_per_node}; NVIDIA driver {driver}, "
        f"the CUDA 13.0 wheels need >= {gpu_install.MIN_DRIVER}; torch {node.torch_version}"
    )
    if node.count < gpus_per_node:
        why = gpu_install.why_too_few(node, gpus_per_node)
        return _fail(
            "gpu", f"{detail}; why: {why}", "run on a GPU node of the cluster, or lower trainer.n_gpus_per_node"
        )
    if node.driver is not None and not gpu_install.driver_ok(node.driver):
        return _fail("gpu", detail, f"update the NVIDIA driver to >= {gpu_install.MIN_DRIVER}")
    return Result("gpu", True, detail)


def iter_checks(inputs: Inputs, plans: list[ArmPlan], skip: Collection[str] = ()) -> Iterator[Result]:
    """Every check not in ``skip``, cheap ones first (the data before anything heavy)."""
    nnodes = max(int(setting(p.overrides, "trainer.nnodes")) for p in plans)
    per_node = max(int(setting(p.overrides, "trainer.n_gpus_per_node")) for p in plans)
    cpu = [setting(p.overrides, "trainer.device") == "cpu" for p in plans]
    steps: dict[str, Callable[[], Result | list[Result]]] = {
        "data": lambda: check_data(inputs.data_dir),
        "revision": lambda: check_revision(inputs.model_path),
        "weights": lambda: check_weights(inputs.model_path),
        "storage": lambda: [check_storage(p) for p in plans],
        "attention": lambda: [check_attention(p) for p in plans],
        "driver_memory": lambda: [check_driver_memory(p) for p in plans],
        "disk": lambda: check_disk(inputs.model_path, inputs.ckpt_dir, plans),
        "tokenizer": lambda: check_tokenizer(inputs.model_path, plans),
        "packages": check_packages,
        "ray": lambda: check_ray(nnodes, per_node),
        "nodes": lambda: check_nodes(inputs, plans, nnodes, per_node, "cpu" if all(cpu) else "cuda"),
        "gpu": lambda: check_gpu(per_node, "cpu" if all(cpu) else "cuda"),
    }
    for name in (c for c in CHECKS if c not in skip):
        try:
            out = steps[name]()
        except Exception as err:  # noqa: BLE001 - a check that breaks is reported, the others still run
            out = _fail(name, f"the check itself failed: {type(err).__name__}: {err}", "see the error above")
        yield from out if isinstance(out, list) else [out]


def run_checks(inputs: Inputs, plans: list[ArmPlan], skip: Collection[str] = ()) -> list[Result]:
    """All results of ``iter_checks``."""
    return list(iter_checks(inputs, plans, skip))


def format_result(r: Result) -> str:
    """One line per check, the fix under a failure."""
    line = f"{'PASS' if r.ok else 'FAIL'}  {r.name:<22} {r.detail}"
    return line if r.ok or not r.fix else f"{line}\n      fix: {r.fix}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    p.add_argument("--model-path", help="the starting checkpoint's folder (default: $MODEL_PATH)")
    p.add_argument("--data-dir", help="folder of train.parquet and val.parquet (default: $DATA_DIR)")
    p.add_argument("--ckpt-dir", help="verl's checkpoints go to <ckpt-dir>/<arm> (default: $CKPT_DIR)")
    p.add_argument("--arms", nargs="+", choices=tuple(configs.PAPER_ARMS), default=list(configs.PAPER_ARMS))
    p.add_argument("--profile", choices=PROFILES, default="cluster", help="which recorded overrides to read")
    p.add_argument("--skip", default="", help=f"comma-separated checks to skip, of {','.join(CHECKS)}")
    args = p.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(CHECKS):
        p.error(f"--skip {','.join(sorted(skip - set(CHECKS)))}: unknown; checks are {','.join(CHECKS)}")
    inputs = Inputs(
        args.model_path or os.environ.get("MODEL_PATH", ""),
        args.data_dir or os.environ.get("DATA_DIR", ""),
        args.ckpt_dir or os.environ.get("CKPT_DIR", ""),
    )
    try:
        plans = [read_plan(a, args.profile) for a in args.arms]
    except FileNotFoundError as err:
        print(format_result(_fail("overrides", str(err), "python -m brorl_lib.verl_recipe.record")))
        return 1
    failed = 0
    for r in iter_checks(inputs, plans, skip):
        print(format_result(r), flush=True)
        failed += not r.ok
    print(f"{failed} check(s) failed" if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
