"""Preflight's per-node check: its task body on this machine without Ray, then one task per node of a two-node Ray
cluster on this machine, through preflight's own route (a child process that connects to the cluster)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hang_limits import HANG_S
from test_verl_preflight import plan, save_model_folder

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.verl_recipe import data, node_check, preflight


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    model = save_model_folder(tmp_path_factory.mktemp("model"))
    folder = tmp_path_factory.mktemp("data")
    train, val = data.reasoning_gym_frames(["countdown"], 3, 2, 0)
    data.write_parquet(train, folder / "train.parquet")
    data.write_parquet(val, folder / "val.parquet")
    return preflight.Inputs(str(model), str(folder), str(tmp_path_factory.mktemp("checkpoints")))


def test_task_body_passes_here_and_names_each_missing_piece(folders, tmp_path):
    report = node_check.probe(folders, [plan()], str(REPO_ROOT), "cpu", 0)
    assert report.ok, [r for r in report.results if not r.ok]
    names = [r.name for r in report.results]
    assert names == ["import", "fallback", "data", "ckpt_dir", "tokenizer", "driver_memory[brorl]", "gpu"]
    assert "available" in report.results[5].detail  # this node's free memory against the padded batch
    missing = preflight.Inputs(str(tmp_path / "no-model"), folders.data_dir, folders.ckpt_dir)
    bad = node_check.summary(node_check.probe(missing, [plan()], str(REPO_ROOT), "cpu", 0))
    assert not bad.ok and bad.detail.startswith("tokenizer: MODEL_PATH=") and "no-model" in bad.detail
    elsewhere = node_check.probe(folders, [plan()], str(tmp_path), "cpu", 0)  # the repository at another path
    assert [r.name for r in elsewhere.results if not r.ok] == ["import"]
    gpu = node_check.probe(folders, [plan()], str(REPO_ROOT), "cuda", 8)  # this machine has no GPU
    assert [r.name for r in gpu.results if not r.ok] == ["gpu"]


def test_each_node_writes_and_reads_ckpt_dir_and_finds_the_heads_file(folders, tmp_path):
    token = node_check.write_head_file(folders.ckpt_dir)
    try:
        seen = node_check.check_ckpt_dir(folders.ckpt_dir, token)
        assert seen.ok and "the head's file seen" in seen.detail
        assert node_check.check_ckpt_dir(folders.ckpt_dir).ok  # without Ray: written and read here
        local = node_check.check_ckpt_dir(str(tmp_path / "node-local"), token)  # a folder the head did not write
        assert not local.ok and f"does not hold the head's head-{token}" in local.detail
    finally:
        node_check.remove_head_file(folders.ckpt_dir, token)
    assert not (Path(folders.ckpt_dir) / node_check.PROBE_DIR).exists()  # nothing left behind
    (tmp_path / "a-file").write_text("")
    unwritable = node_check.check_ckpt_dir(str(tmp_path / "a-file" / "checkpoints"))
    assert not unwritable.ok and "cannot write and read a file there" in unwritable.detail
    unset = node_check.check_ckpt_dir("")
    assert not unset.ok and unset.detail == "CKPT_DIR is not set" and "every node mounts" in unset.fix
    report = node_check.probe(preflight.Inputs(folders.model_path, folders.data_dir, ""), [plan()], str(REPO_ROOT),
                              "cpu", 0)  # fmt: skip
    assert [r.name for r in report.results if not r.ok] == ["ckpt_dir"]


@pytest.fixture(scope="module")
def local_ray():
    """A Ray cluster of two nodes on this machine (Ray's own test cluster: a head and one worker raylet)."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    try:
        cluster.wait_for_nodes()
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.slow
def test_one_task_per_node_of_a_two_node_ray_cluster_and_the_node_missing_a_path_is_named(
    folders, local_ray, tmp_path, monkeypatch
):
    import ray

    alive = [n for n in ray.nodes() if n["Alive"]]
    assert len(alive) == 2
    niceness = ray.remote(num_cpus=0)(lambda: os.nice(0))  # a lambda travels by value: the workers lack tests/
    assert ray.get(niceness.remote()) == 0  # not Ray's nice 15 (conftest.py)
    names = sorted(f"{n['NodeManagerHostname']} ({n['NodeManagerAddress']})" for n in alive)
    # each node's task takes seconds on 2 idle cores and over 300 s (the check's own limit) beside 8 busy processes
    reports = node_check.run_on_nodes(folders, [plan()], str(REPO_ROOT), "cpu", 0, timeout_s=HANG_S)
    assert sorted(r.node for r in reports) == names and all(r.ok for r in reports), reports
    ckpt = [next(r for r in report.results if r.name == "ckpt_dir") for report in reports]
    assert all("the head's file seen" in r.detail for r in ckpt)  # each node saw the file the head wrote
    assert not (Path(folders.ckpt_dir) / node_check.PROBE_DIR).exists()
    # preflight's route: a child process joins the running cluster (RAY_ADDRESS) and reports each node as JSON
    monkeypatch.setenv("RAY_ADDRESS", local_ray)
    absent = preflight.Inputs(folders.model_path, str(tmp_path / "no-data"), folders.ckpt_dir)
    results = preflight.check_nodes(absent, [plan()], 2, 0, "cpu", timeout_s=HANG_S)
    assert sorted(r.name for r in results) == [f"nodes[{n}]" for n in names] and not any(r.ok for r in results)
    for result in results:
        assert result.detail.startswith(f"data: DATA_DIR={tmp_path / 'no-data'}") and "DATA_DIR must hold" in result.fix
    # a cluster with fewer nodes than trainer.nnodes is a failure of its own
    results = preflight.check_nodes(folders, [plan()], 3, 0, "cpu", timeout_s=HANG_S)
    assert all(r.ok for r in results[:2]) and not results[2].ok
    assert "2 node(s) answered, trainer.nnodes=3" in results[2].detail
