"""Preflight's per-node check: its task body on this machine without Ray, then one task per node of a local Ray
instance, through preflight's own route (a child process that connects to the cluster)."""

from __future__ import annotations

import pytest
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
    return preflight.Inputs(str(model), str(folder), "")


def test_task_body_passes_here_and_names_each_missing_piece(folders, tmp_path):
    report = node_check.probe(folders, [plan()], str(REPO_ROOT), "cpu", 0)
    assert report.ok, [r for r in report.results if not r.ok]
    names = [r.name for r in report.results]
    assert names == ["import", "fallback", "data", "tokenizer", "driver_memory[brorl]", "gpu"]
    assert "available" in report.results[4].detail  # this node's free memory against the padded batch
    missing = preflight.Inputs(str(tmp_path / "no-model"), folders.data_dir, "")
    bad = node_check.summary(node_check.probe(missing, [plan()], str(REPO_ROOT), "cpu", 0))
    assert not bad.ok and bad.detail.startswith("tokenizer: MODEL_PATH=") and "no-model" in bad.detail
    elsewhere = node_check.probe(folders, [plan()], str(tmp_path), "cpu", 0)  # the repository at another path
    assert [r.name for r in elsewhere.results if not r.ok] == ["import"]
    gpu = node_check.probe(folders, [plan()], str(REPO_ROOT), "cuda", 8)  # this machine has no GPU
    assert [r.name for r in gpu.results if not r.ok] == ["gpu"]


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_one_task_per_node_of_local_ray_and_the_node_missing_a_path_is_named(folders, local_ray, tmp_path, monkeypatch):
    import ray

    (node,) = [n for n in ray.nodes() if n["Alive"]]
    name = f"{node['NodeManagerHostname']} ({node['NodeManagerAddress']})"
    (report,) = node_check.run_on_nodes(folders, [plan()], str(REPO_ROOT), "cpu", 0)
    assert report.node == name and report.ok, [r for r in report.results if not r.ok]
    # preflight's route: a child process joins the running cluster (RAY_ADDRESS) and reports each node as JSON
    monkeypatch.setenv("RAY_ADDRESS", local_ray)
    absent = preflight.Inputs(folders.model_path, str(tmp_path / "no-data"), "")
    (result,) = preflight.check_nodes(absent, [plan()], 1, 0, "cpu")
    assert result.name == f"nodes[{name}]" and not result.ok
    assert result.detail.startswith(f"data: DATA_DIR={tmp_path / 'no-data'}") and "DATA_DIR must hold" in result.fix
    # a cluster with fewer nodes than trainer.nnodes is a failure of its own
    results = preflight.check_nodes(preflight.Inputs(folders.model_path, folders.data_dir, ""), [plan()], 2, 0, "cpu")
    assert results[0].ok and not results[1].ok and "1 node(s) answered, trainer.nnodes=2" in results[1].detail
