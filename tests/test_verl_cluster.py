"""The cluster path that needs no cluster to check: the Slurm batch job (run with Slurm, Ray and Python stubbed),
the README's GPU-hours against the plan, and datasets pinned by commit."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys

import pandas as pd
import pytest
from hang_limits import HANG_S

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.verl_recipe import data, record, report

SLURM = record.RECORD_DIR / "slurm" / "run_arm.sh"
STUB = '#!/usr/bin/env bash\necho "$(basename "$0") $*" >> "$CALLS"\n'


def _stub(folder, name, body=""):
    path = folder / name
    path.write_text(STUB + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


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
    _stub(bin_dir, "srun", '[[ "$*" != *hostname* ]] || echo "10.0.0.1 fe80::1"\n')
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
        "RAY_START_WAIT_S": "0",
    }
    return env, tmp_path / "calls.txt"


def test_slurm_job_is_valid_bash_and_starts_ray_head_then_workers_then_the_arm(job):
    subprocess.run(["bash", "-n", str(SLURM)], check=True)
    env, calls = job
    out = subprocess.run(["bash", str(SLURM), "brorl", "smoke", "trainer.val_before_train=false"], env=env,
                         capture_output=True, text=True, timeout=HANG_S)  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = calls.read_text().splitlines()
    head = next(i for i, c in enumerate(lines) if "ray start --head" in c)
    worker = next(i for i, c in enumerate(lines) if "ray start --address=10.0.0.1:6379" in c)
    assert "-w node-a" in lines[head] and "--node-ip-address=10.0.0.1" in lines[head] and "--num-gpus=8" in lines[head]
    assert "-w node-b" in lines[worker] and head < worker
    preflight = next(i for i, c in enumerate(lines) if "brorl_lib.verl_recipe.preflight" in c)
    assert "--arms brorl --profile smoke" in lines[preflight] and worker < preflight
    assert lines[-2:] == ["launch.sh trainer.val_before_train=false", "RAY_ADDRESS=10.0.0.1:6379"]


@pytest.mark.parametrize(
    ("args", "slurm", "message"),
    [
        (["grpo"], {}, "ARM=grpo is not allowed: prorl or brorl"),
        (["brorl", "paper"], {}, "PROFILE=paper is not allowed: cluster or smoke"),
        (["brorl", "smoke"], {"SLURM_JOB_NUM_NODES": "1"}, "trainer.nnodes=2 x trainer.n_gpus_per_node=8"),
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
