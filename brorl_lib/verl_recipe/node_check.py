"""Preflight on every node of a running Ray cluster: one task pinned to each alive node.

verl places its agent-loop and reward workers round-robin over the nodes and its TaskRunner on any node
(verl/experimental/agent_loop/agent_loop.py, verl/experimental/reward_loop/reward_loop.py,
verl/trainer/main_ppo.py), so what preflight checks on the head must hold on every node: ``brorl_lib``
importable from the repository on ``PYTHONPATH`` (as ``launch_arm.sh`` passes it to Ray's runtime env), the
tokenizer fallback importing and building verl's continuous-token builder from MODEL_PATH, DATA_DIR's parquet
files, CKPT_DIR written and read there and holding the file the head wrote (every rank saves its shard under
trainer.default_local_dir, and a resume reads them all: one folder all nodes share), the padded driver batch against
this node's free memory, and its GPUs and NVIDIA driver.

``probe`` is the task's body, a plain function (tested without Ray); ``run_on_nodes`` pins one to each node
with Ray's ``NodeAffinitySchedulingStrategy`` and names each node that fails or does not answer;
``python -m brorl_lib.verl_recipe.node_check`` (the arms' plans as JSON on stdin) does it on the cluster at
``--address`` and prints one preflight result per node as JSON, which
preflight's ``nodes`` check reads (in a child process, so that a stale cluster cannot hang preflight).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import secrets
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from brorl_lib.verl_recipe import preflight
from brorl_lib.verl_recipe.preflight import ArmPlan, Inputs, Result

COMMAND, TIMEOUT_S = preflight.NODE_CHECK_COMMAND, preflight.NODE_CHECK_TIMEOUT_S
FALLBACK_MODULE = "brorl_lib.verl_recipe.tokenizer_fallback"  # launch.FALLBACK_MODULE (not imported: launch is heavy)
PROBE_DIR = ".brorl-node-check"  # under CKPT_DIR: the files the check writes, removed after it


@dataclass(frozen=True)
class NodeReport:
    """One node's results; ``node`` is its host name and IP address as Ray reports them."""

    node: str
    results: tuple[Result, ...]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


def _imports(repo_root: str) -> list[Result]:
    """brorl_lib imported from ``repo_root`` (the path launch scripts put on PYTHONPATH), and the fallback."""
    import brorl_lib

    found = Path(brorl_lib.__file__).resolve().parent.parent
    fix = f"the repository at {repo_root} on every node (same path), or REPO_ROOT set to where it is"
    if found != Path(repo_root).resolve():
        out = [preflight._fail("import", f"brorl_lib imports from {found}, not {repo_root}", fix)]
    else:
        out = [Result("import", True, f"brorl_lib from {found}")]
    try:
        importlib.import_module(FALLBACK_MODULE)
    except Exception as err:  # noqa: BLE001 - any failure to import is the finding
        return out + [preflight._fail("fallback", f"{FALLBACK_MODULE}: {type(err).__name__}: {err}", fix)]
    return out + [Result("fallback", True, f"{FALLBACK_MODULE} imports")]


def check_ckpt_dir(ckpt_dir: str, head_token: str | None = None) -> Result:
    """This node writes a file under CKPT_DIR and reads it back; given ``head_token``, it also reads the file the head
    wrote there with that name and content (``write_head_file``), so the folder is the head's, not a local one."""
    fix = "CKPT_DIR on a filesystem every node mounts at the same path, writable by this user"
    if not ckpt_dir:
        return preflight._fail("ckpt_dir", "CKPT_DIR is not set", fix)
    folder = Path(ckpt_dir).expanduser() / PROBE_DIR
    mine = folder / f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
    text = f"written by {mine.name}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        mine.write_text(text)
        read = mine.read_text()
        mine.unlink()
    except OSError as err:
        return preflight._fail("ckpt_dir", f"CKPT_DIR={ckpt_dir}: cannot write and read a file there ({err})", fix)
    if read != text:
        return preflight._fail("ckpt_dir", f"CKPT_DIR={ckpt_dir}: a file read back differs from what was written", fix)
    if head_token is not None:
        head = folder / f"head-{head_token}"
        if not head.is_file() or head.read_text() != head_token:
            return preflight._fail("ckpt_dir", f"CKPT_DIR={ckpt_dir} here does not hold the head's {head.name}", fix)
        return Result("ckpt_dir", True, f"{ckpt_dir}: written and read here, and the head's file seen")
    return Result("ckpt_dir", True, f"{ckpt_dir}: written and read here")


def write_head_file(ckpt_dir: str) -> str | None:
    """The head's file under CKPT_DIR for ``check_ckpt_dir`` to find on every node: its token (None when it cannot
    be written; each node's own write then names the fault)."""
    token = secrets.token_hex(8)
    try:
        folder = Path(ckpt_dir).expanduser() / PROBE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"head-{token}").write_text(token)
    except OSError:
        return None
    return token


def remove_head_file(ckpt_dir: str, token: str) -> None:
    """Remove the head's file, and the check's folder once empty."""
    folder = Path(ckpt_dir).expanduser() / PROBE_DIR
    (folder / f"head-{token}").unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:  # another check's files are still there
        pass


def probe(
    inputs: Inputs, plans: Sequence[ArmPlan], repo_root: str, device: str, gpus_per_node: int,
    head_token: str | None = None,
) -> NodeReport:  # fmt: skip
    """The per-node task's body, run on the node it checks: imports, data, CKPT_DIR (``check_ckpt_dir``), model and
    tokenizer, free memory against each arm's padded driver batch, GPUs and driver (preflight's own checks)."""
    steps: list[Callable[[], Result | list[Result]]] = [
        lambda: _imports(repo_root),
        lambda: preflight.check_data(inputs.data_dir),
        lambda: check_ckpt_dir(inputs.ckpt_dir, head_token),
        lambda: preflight.check_tokenizer(inputs.model_path, plans),
        lambda: [preflight.check_driver_memory(p) for p in plans],
        lambda: preflight.check_gpu(gpus_per_node, device),
    ]
    results: list[Result] = []
    for step in steps:
        try:
            out = step()
        except Exception as err:  # noqa: BLE001 - a check that breaks is reported, the others still run
            out = preflight._fail("node", f"a check failed: {type(err).__name__}: {err}", "see the error")
        results += out if isinstance(out, list) else [out]
    return NodeReport(f"{socket.gethostname()} ({socket.gethostbyname(socket.gethostname())})", tuple(results))


def run_on_nodes(
    inputs: Inputs,
    plans: Sequence[ArmPlan],
    repo_root: str,
    device: str,
    gpus_per_node: int,
    env_vars: dict[str, str] | None = None,
    timeout_s: float = TIMEOUT_S,
) -> list[NodeReport]:
    """``probe`` on every alive node of the Ray cluster this process is connected to (``ray.init`` first), each
    task pinned to its node, with ``env_vars`` in its runtime env (default: PYTHONPATH=repo_root, as
    launch_arm.sh, and the plans' VERL_USE_EXTERNAL_MODULES). A task that raises (brorl_lib not importable
    there) or does not answer names its node."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if not ray.is_initialized():
        raise RuntimeError("run_on_nodes needs a Ray connection: call ray.init(address=...) first")
    modules = next((p.modules for p in plans if p.modules), "")
    if env_vars is None:
        env_vars = {"PYTHONPATH": repo_root} | ({"VERL_USE_EXTERNAL_MODULES": modules} if modules else {})
    task = ray.remote(num_cpus=0, max_retries=0)(probe)
    nodes = {n["NodeID"]: f"{n['NodeManagerHostname']} ({n['NodeManagerAddress']})" for n in ray.nodes() if n["Alive"]}
    token = write_head_file(inputs.ckpt_dir) if inputs.ckpt_dir else None
    refs = {
        task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False), runtime_env={"env_vars": env_vars}
        ).remote(inputs, list(plans), repo_root, device, gpus_per_node, token): node_id
        for node_id in nodes
    }
    try:
        done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    finally:
        if token is not None:
            remove_head_file(inputs.ckpt_dir, token)
    reports = []
    for ref, node_id in refs.items():
        name = nodes[node_id]
        if ref not in done:
            fail = preflight._fail("answer", f"no answer in {timeout_s:.0f} s", "check the node's raylet and disk")
            reports.append(NodeReport(name, (fail,)))
            continue
        try:
            reports.append(dataclasses.replace(ray.get(ref), node=name))
        except Exception as err:  # noqa: BLE001 - the task could not run there (import, runtime env)
            last = str(err).strip().splitlines()[-1:] or [type(err).__name__]
            fix = f"the repository at {repo_root} on every node, installed as on the head"
            reports.append(NodeReport(name, (preflight._fail("task", f"the task failed: {last[0]}", fix),)))
    return reports


def summary(report: NodeReport) -> Result:
    """One preflight result per node, ``nodes[<host> (<ip>)]``: every failed item with its fix, or what passed."""
    name = f"nodes[{report.node}]"
    bad = [r for r in report.results if not r.ok]
    if not bad:
        return Result(name, True, "; ".join(f"{r.name}: {r.detail}" for r in report.results))
    return preflight._fail(
        name, "; ".join(f"{r.name}: {r.detail}" for r in bad), "; ".join(dict.fromkeys(r.fix for r in bad if r.fix))
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    p.add_argument("--address", default="auto", help="the Ray cluster (default: auto, the one this node belongs to)")
    p.add_argument("--model-path", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--ckpt-dir", default="", help="CKPT_DIR, written and read on every node")
    p.add_argument("--repo-root", default=str(preflight.REPO_ROOT))
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--gpus-per-node", type=int, required=True)
    p.add_argument("--timeout", type=float, default=TIMEOUT_S)
    args = p.parse_args(argv)
    plans = [ArmPlan(**p) for p in json.load(sys.stdin)]  # preflight's plans, as dataclasses.asdict wrote them
    import ray

    ray.init(address=args.address, log_to_driver=False, logging_level="ERROR")
    try:
        inputs = Inputs(args.model_path, args.data_dir, args.ckpt_dir)
        reports = run_on_nodes(inputs, plans, args.repo_root, args.device, args.gpus_per_node, timeout_s=args.timeout)
    finally:
        ray.shutdown()
    print(json.dumps([dataclasses.asdict(summary(r)) for r in reports]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
