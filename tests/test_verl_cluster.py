"""The cluster path that needs no cluster to check: the Slurm batch job (run with Slurm, Ray and Python stubbed),
the README's GPU-hours against the plan, and datasets pinned by commit."""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from hang_limits import HANG_S

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.verl_recipe import data, processes, record, report
from brorl_lib.verl_recipe.cpu.run import RAY_START_MISSED, RAY_START_TRIES

SLURM = record.RECORD_DIR / "slurm" / "run_arm.sh"
STUB = '#!/usr/bin/env bash\necho "$(basename "$0") $*" >> "$CALLS"\n'
# Slurm's srun as this machine runs it: the command in a session of its own, and, as Slurm does when a step's task
# ends, every process left in that session ended with it (so a `ray start` without --block takes its node down)
SRUN = f"""#!{sys.executable}
import os, signal, subprocess, sys
from brorl_lib.verl_recipe import processes
args = sys.argv[1:]
with open(os.environ["CALLS"], "a") as calls:
    calls.write("srun " + " ".join(args) + "\\n")
while args[0].startswith("-"):
    if args.pop(0) in ("-w", "-N", "-n"):
        args.pop(0)
proc = subprocess.Popen(args, start_new_session=True)
def stop(*_):  # no wait here: the main thread's proc.wait() holds Popen's lock
    os.killpg(proc.pid, signal.SIGKILL)
    processes._kill(processes.in_session(proc.pid))
    os._exit(143)
signal.signal(signal.SIGTERM, stop)
proc.wait()
processes.end(proc)
sys.exit(proc.returncode)
"""


def _srun(folder, answers):
    """srun as a stub: records its call, answers an address query with ``answers`` (bash), and keeps a `ray start
    --block` step running until the job ends it."""
    return _stub(folder, "srun", answers + '[[ "$*" != *--block* ]] || exec sleep 600\n')


def _stub(folder, name, body="", text=None):
    path = folder / name
    path.write_text(text or STUB + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.fixture
def job(tmp_path):
    """A repository with the smoke profile's BroRL overrides and a launch script that records how it was called,
    and Slurm's scontrol and srun, Ray and Python as stubs recording their calls."""
    repo, bin_dir = tmp_path / "repo", tmp_path / "bin"
    arm = repo / "recipes" / "brorl" / "smoke" / "brorl"
    arm.mkdir(parents=True)
    bin_dir.mkdir()
    shutil.copy(record.RECORD_DIR / "smoke" / "brorl" / "overrides.txt", arm)
    _stub(arm, "launch.sh", 'echo "RAY_ADDRESS=$RAY_ADDRESS" >> "$CALLS"\n')
    _stub(bin_dir, "scontrol", "printf 'node-a\\nnode-b\\n'\n")
    _srun(bin_dir, '[[ "$*" != *all-ip-addresses* ]] || echo "fe80::1 10.0.0.1"\n')
    # a node is alive once its `ray start` was called
    python = _stub(bin_dir, "python", '[[ "$1" != -c ]] || grep -c "ray start" "$CALLS"\n')
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(tmp_path / "calls.txt"),
        "PYTHON": str(python),
        "SLURM_SUBMIT_DIR": str(repo),
        "SLURM_JOB_NODELIST": "node-[a-b]",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_GPUS_ON_NODE": "8",
        "SLURM_CPUS_PER_TASK": "64",
        "RAY_START_WAIT_S": "0",
    }
    return env, tmp_path / "calls.txt"


def test_slurm_job_is_valid_bash_and_asks_slurm_for_time_memory_and_cpus():
    subprocess.run(["bash", "-n", str(SLURM)], check=True)
    header = dict(re.findall(r"^#SBATCH --([\w-]+)=?(\S*)", SLURM.read_text(), re.M))
    assert header["time"] and header["mem"] == "0" and int(header["cpus-per-task"]) >= int(header["gpus-per-node"])
    docs = (record.REPO_ROOT / "docs" / "gpu-and-clusters.md").read_text()
    assert "NET_IFACE" in docs and "NCCL_SOCKET_IFNAME" in docs and "GLOO_SOCKET_IFNAME" in docs


@pytest.mark.parametrize("profile", ["smoke", "cluster"])
def test_slurm_job_starts_ray_head_then_workers_on_ipv4_then_the_smoke_or_the_arm(job, tmp_path, profile):
    env, calls = job
    if profile == "cluster":  # a one-node-per-arm record, as the committed one has 8 nodes
        arm = tmp_path / "repo" / "recipes" / "brorl" / "brorl"
        arm.mkdir(parents=True)
        shutil.copy(tmp_path / "repo" / "recipes" / "brorl" / "smoke" / "brorl" / "overrides.txt", arm)
        _stub(arm, "launch.sh", 'echo "RAY_ADDRESS=$RAY_ADDRESS" >> "$CALLS"\n')
    extra = ["trainer.val_before_train=false"] if profile == "cluster" else []
    out = subprocess.run(["bash", str(SLURM), "brorl", profile, *extra], env={**env, "NET_IFACE": ""},
                         capture_output=True, text=True, timeout=HANG_S)  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = calls.read_text().splitlines()
    head = next(i for i, c in enumerate(lines) if "ray start --head" in c)
    worker = next(i for i, c in enumerate(lines) if "ray start --address=10.0.0.1:6379" in c)
    for i in (head, worker):
        assert "--node-ip-address=10.0.0.1" in lines[i] and "--num-gpus=8 --num-cpus=64" in lines[i]
        assert lines[i].endswith("--block")
    assert "-w node-a" in lines[head] and "-w node-b" in lines[worker] and head < worker
    if profile == "smoke":
        assert lines[-1] == "python -m brorl_lib.verl_recipe.smoke --arms brorl --skip " and worker < len(lines) - 1
        assert not any("launch.sh" in c for c in lines)  # the smoke launches, never the job itself
    else:
        preflight = next(i for i, c in enumerate(lines) if "brorl_lib.verl_recipe.preflight" in c)
        assert "--arms brorl --profile cluster" in lines[preflight] and worker < preflight
        assert lines[-2:] == ["launch.sh trainer.val_before_train=false", "RAY_ADDRESS=10.0.0.1:6379"]


def test_slurm_job_takes_ray_and_nccl_addresses_from_the_interface_given(job):
    env, calls = job
    stub = '[[ "$*" != *"show dev ib0"* ]] || echo "5: ib0    inet 10.1.0.7/16 brd 10.1.255.255 scope global ib0"\n'
    bin_dir = Path(env["PATH"].split(":")[0])
    _srun(bin_dir, stub)
    _stub(bin_dir, "python", '[[ "$1" != -c ]] || grep -c "ray start" "$CALLS"\n'
          'echo "NCCL_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME=$GLOO_SOCKET_IFNAME '
          'RAY_AUTH_MODE=$RAY_AUTH_MODE ${#RAY_AUTH_TOKEN}" >> "$CALLS"\n')  # fmt: skip
    out = subprocess.run(["bash", str(SLURM), "brorl", "smoke"], env={**env, "NET_IFACE": "ib0"},
                         capture_output=True, text=True, timeout=HANG_S)  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = calls.read_text().splitlines()
    assert "Ray head node-a (10.1.0.7:6379)" in out.stdout and "--node-ip-address=10.1.0.7" in "".join(lines)
    assert lines[-2:] == [
        "python -m brorl_lib.verl_recipe.smoke --arms brorl --skip ",
        "NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=ib0 RAY_AUTH_MODE=token 64",  # a token of the job's own
    ]
    calls.unlink()
    _srun(Path(env["PATH"].split(":")[0]), '[[ "$*" != *all-ip-addresses* ]] || echo "fe80::1 fd00::2"\n')
    out = subprocess.run(["bash", str(SLURM), "brorl", "smoke"], env={**env, "NET_IFACE": ""},
                         capture_output=True, text=True, timeout=HANG_S)  # fmt: skip
    assert out.returncode == 1 and "node node-a has no IPv4 address (found: fe80::1 fd00::2)" in out.stderr
    assert "ray start" not in calls.read_text()


@pytest.fixture
def two_process_ray(tmp_path):
    """The job's environment for a real Ray cluster of two nodes on this machine: srun runs each command (and ends
    what it left, as Slurm does), hostname answers an IPv6 address before this machine's IPv4 one, Python is this
    interpreter except for the smoke command, which reports the nodes alive in the cluster it finds."""
    pytest.importorskip("ray")
    from ray._private.services import get_node_ip_address

    ip = get_node_ip_address()
    repo, bin_dir = tmp_path / "repo", tmp_path / "bin"
    (repo / "recipes" / "brorl" / "smoke" / "brorl").mkdir(parents=True)
    bin_dir.mkdir()
    shutil.copy(record.RECORD_DIR / "smoke" / "brorl" / "overrides.txt", repo / "recipes/brorl/smoke/brorl")
    (repo / "recipes/brorl/smoke/brorl/launch.sh").write_text("exit 1\n")
    _stub(bin_dir, "scontrol", "printf 'node-a\\nnode-b\\n'\n")
    _stub(bin_dir, "srun", text=SRUN)
    _stub(bin_dir, "hostname", f'echo "fe80::1 {ip}"\n')
    count = "import os, ray; ray.init(address=os.environ['RAY_ADDRESS'], logging_level='ERROR'); "
    count += "print('alive', sum(n['Alive'] for n in ray.nodes()), os.environ['RAY_ADDRESS'])"
    python = _stub(
        bin_dir,
        "python",
        f"""[[ "$1 $2" != "-m brorl_lib.verl_recipe.smoke" ]] || \\
  exec {sys.executable} -c "{count}" >> "$CALLS"
exec {sys.executable} "$@"
""",
    )
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay short
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(record.REPO_ROOT),
        "CALLS": str(tmp_path / "calls.txt"),
        "PYTHON": str(python),
        "RAY": str(Path(sys.executable).parent / "ray"),
        "RAY_TMPDIR": ray_tmp,  # this cluster's files, apart from any other Ray on this machine
        "RAY_START_ARGS": "--dashboard-agent-listen-port=0 --object-store-memory=80000000 --disable-usage-stats",
        "RAY_START_WAIT_S": "0",
        "SLURM_SUBMIT_DIR": str(repo),
        "SLURM_JOB_NODELIST": "node-[a-b]",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_GPUS_ON_NODE": "8",
        "SLURM_CPUS_PER_TASK": "2",
        "NET_IFACE": "",
    }

    def run_job():
        """The job on fresh ports, started again (at most RAY_START_TRIES) when a raylet missed Ray's own start-up
        deadline on a busy machine (as cpu.run does for verl's launches); the last try's result and address."""
        for _ in range(RAY_START_TRIES):
            port, client = _free_ports(2)
            env.update(RAY_PORT=str(port), RAY_HEAD_ARGS=f"--include-dashboard=false --ray-client-server-port={client}")
            out = subprocess.run(["bash", str(SLURM), "brorl", "smoke"], env=env, capture_output=True, timeout=HANG_S)
            processes._kill(processes.marked(ray_tmp, "RAY_TMPDIR"))
            if out.returncode == 0 or RAY_START_MISSED not in out.stdout + out.stderr:
                break
        return out, f"{ip}:{port}"

    try:
        yield run_job, env, tmp_path / "calls.txt"
    finally:  # whatever the job left of this cluster (nothing, when it ends as it should)
        processes._kill(processes.marked(ray_tmp, "RAY_TMPDIR"))
        shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.mark.slow
def test_slurm_job_runs_the_smoke_on_a_real_two_node_ray_cluster_at_an_ipv4_address(two_process_ray):
    run_job, env, calls = two_process_ray
    (out, address), left = run_job(), None
    assert out.returncode == 0, (out.stdout + out.stderr).decode(errors="replace")
    assert calls.read_text().splitlines()[-1] == f"alive 2 {address}"  # both nodes up when the smoke starts
    deadline = time.monotonic() + HANG_S  # and the job's end ends them (its srun steps)
    while (left := processes.marked(env["RAY_TMPDIR"], "RAY_TMPDIR")) and time.monotonic() < deadline:
        time.sleep(1)
    assert not left


@pytest.mark.parametrize(
    ("args", "slurm", "message"),
    [
        (["grpo"], {}, "ARM=grpo is not allowed: prorl or brorl"),
        (["brorl", "paper"], {}, "PROFILE=paper is not allowed: cluster or smoke"),
        (["brorl", "smoke"], {"SLURM_JOB_NUM_NODES": "1"}, "trainer.nnodes=2 x trainer.n_gpus_per_node=8"),
        (["brorl", "smoke", "data.seed=1"], {}, "Hydra overrides (data.seed=1) are not allowed with PROFILE=smoke"),
        (["brorl", "smoke"], {"SLURM_CPUS_PER_TASK": ""}, "RAY_NUM_CPUS= is not allowed: a positive integer"),
    ],
)
def test_slurm_job_refuses_bad_input_before_starting_ray(job, args, slurm, message):
    env, calls = job
    out = subprocess.run(
        ["bash", str(SLURM), *args], env={**env, **slurm}, capture_output=True, text=True, timeout=HANG_S
    )
    assert out.returncode == 2 and message in out.stderr
    assert not calls.exists()  # nothing called: no srun, no Ray


def test_readme_gpu_hours_are_the_plans():
    plan = report.plan_table(report.VerlTrainingConfig()).set_index("arm")
    smoke_h = report.smoke_hours()
    rows = [f"| smoke, {report.ARM_LABELS[a]} | 16 | 2 | {h:,.1f} | {h * 16:,.0f} |" for a, h in smoke_h.items()]
    rows += [
        f"| {report.ARM_LABELS[a]} | {r.gpus} | {r.steps} | {r.expected_hours:,.1f} | {r.expected_gpu_hours:,.0f} |"
        for a, r in plan.iterrows()
    ]
    readme = (record.RECORD_DIR / "README.md").read_text()
    assert "| smoke, BroRL |" in rows[0]  # BroRL first
    for row in rows:
        assert row in readme
    total = sum(smoke_h.values())  # validations included (smoke.arm_hours)
    assert f"(about {total:.1f} h, {total * 16:,.0f} GPU-hours, by the table above), BroRL first" in readme
    front = (REPO_ROOT / "README.md").read_text()
    assert f"(about {total:.1f} h, {total * 16:,.0f} GPU-hours by the plan, its validations included)" in front
    docs = (REPO_ROOT / "docs" / "gpu-and-clusters.md").read_text()
    assert f"smoke       # about {total:.1f} h on two 8-GPU nodes" in docs and f"(≈ {total:.1f} h with its four" in docs


def test_a_dataset_pinned_by_commit_is_loaded_at_that_commit(monkeypatch):
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert data.hub_revision(f"owner/math@{commit}") == ("owner/math", commit)
    assert data.hub_revision("owner/math") == ("owner/math", None)
    report.check_dataset("math_dataset", f"owner/math@{commit}")  # allowed, as a Hugging Face id
    with pytest.raises(ValueError, match="math_dataset='owner/math@main' is not allowed"):
        report.check_dataset("math_dataset", "owner/math@main")  # a branch moves: only a commit pins
    seen = {}

    class Loaded:
        def to_pandas(self):
            return pd.DataFrame({"problem": ["1+1?"], "answer": ["2"]})

    def load_dataset(repo, split, revision=None):
        seen.update(repo=repo, split=split, revision=revision)
        return Loaded()

    monkeypatch.setitem(sys.modules, "datasets", type(sys)("datasets"))
    monkeypatch.setattr(sys.modules["datasets"], "load_dataset", load_dataset, raising=False)
    df = data.load_records(f"owner/math@{commit}", "math", "math_dataset")
    assert seen == {"repo": "owner/math", "split": "train", "revision": commit} and len(df) == 1


def test_docs_name_what_only_the_cluster_checks_and_each_cpu_test_exists():
    docs = (record.REPO_ROOT / "docs" / "gpu-and-clusters.md").read_text()
    section = docs.split("### What only the cluster can check", 1)[1].split("\n## ", 1)[0]
    for needs in ("NCCL across nodes", "16,384-token responses, 36,864-token micro-batches", "Slurm starting Ray"):
        assert needs in section
    named = re.findall(r"`(tests/[\w/.]+)`", section)
    assert len(named) >= 5 and all((record.REPO_ROOT / path).exists() for path in named)
