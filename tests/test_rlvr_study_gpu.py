"""The GPU row set's entry point (``brorl_lib.rlvr.study_gpu``) on a CPU with the tiny settings: every stage runs,
record.json says what ran where, the grid has a row for every checkpoint x N x S x repetition (measured by worker
processes, one checkpoint each), and bad arguments are refused before any work."""

import json
import math
from dataclasses import asdict

import pandas as pd
import pytest
import torch

from brorl_lib.core.variants import profile_values
from brorl_lib.rlvr import candidates, study, study_gpu
from brorl_lib.rlvr import update_quality as uq
from brorl_lib.rlvr.study_config import CountdownStudyConfig

TINY = {"candidates": ["countdown:3@32x1"]}  # the quick profile (the notebook's defaults) with one model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu_rows")
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the module fixture runs outside the per-test fixture; workers take this too
    try:
        record = study_gpu.run(root, "cpu", "quick", TINY, workers=2, progress=False)
    finally:
        torch.set_num_threads(before)
    return root, record


def test_the_record_names_the_card_the_model_and_every_stages_time(rows):
    root, record = rows
    saved = json.loads((root / study_gpu.RECORD).read_text())
    assert saved == json.loads(json.dumps(record))
    assert saved["card"] == "cpu" and saved["device"] == "cpu" and saved["torch"] == torch.__version__
    spec = TINY["candidates"][0]
    assert saved["candidate"] == spec and saved["candidate_key"] == candidates.parse(spec).key
    assert saved["model_params"] == candidates.parse(spec).model_params > 0
    assert saved["finished"] == ["screen", "plateau", "update_quality"]
    assert set(saved["stage_seconds"]) == set(saved["finished"]) and min(saved["stage_seconds"].values()) >= 0
    assert set(saved["update_quality_checkpoint_seconds"]) == set(study.QUALITY_STAGES)  # one worker job each
    assert saved["settings"]["device"] == "cpu" and saved["profile"] == "quick" and saved["parameters"] == TINY
    assert json.loads((root / "settings.json").read_text())["device"] == "cpu"
    screen = pd.read_csv(root / study.SCREEN)
    assert len(screen) == 1 and bool(screen["chosen"].iloc[0])


def test_the_grid_has_every_checkpoint_n_s_and_repetition(rows):
    root, record = rows
    quality = CountdownStudyConfig().quality()
    names = record["checkpoints"]
    assert [n.split("-")[0] for n in names] == list(study.QUALITY_STAGES)
    raw = pd.concat(pd.read_csv(root / "update_quality" / f"{n}.csv") for n in names)
    units = raw[["checkpoint", "n_rollouts", "samples_per_update", "rep"]].drop_duplicates()
    expected = {
        (c, n, s, r) for c in names for n in quality.rollouts for s in quality.samples for r in range(quality.reps)
    }
    assert set(map(tuple, units.itertuples(index=False))) == expected
    assert record["update_quality_units"] == len(expected) and record["update_quality_rows"] == len(raw)
    bands = raw.groupby(["checkpoint", "n_rollouts", "samples_per_update", "rep"])["q_band"].apply(set)
    assert all(uq.ALL in b for b in bands)  # every update judged on all measured prompts too
    assert raw["cosine"].between(-1, 1).all() and raw["delta_q"].abs().le(1).all()
    cfg = CountdownStudyConfig()
    for s, lr in raw.groupby("samples_per_update")["lr"].first().items():  # phase 1's rate by the square-root rule
        assert lr == pytest.approx(cfg.base_lr * math.sqrt(s / (study.BASE_N * cfg.phase1_prompts)))
    summary = uq.summarise(raw)
    assert (summary["reps"] == quality.reps).all()


def test_bad_arguments_are_refused_before_any_work(tmp_path):
    root = tmp_path / "never"
    cases = [
        (dict(parameters={"candidates": ["countdown:9@64x2"]}), "candidates"),
        (dict(parameters={"candidates": ["countdown:3@32x1", "countdown:3@64x2"]}), "one model"),
        (dict(device="tpu"), "device"),
        (dict(parameters={"phase1_max_steps": 100}), "phase1_max_steps"),  # below the screen's 160 steps
        (dict(parameters={"phase1_max_steps": 165}), "phase1_max_steps"),  # not a multiple of eval_every
        (dict(parameters={"warm_start": 3}), "no parameter 'warm_start'"),
        (dict(parameters={"update_reps": 1}), "update_reps"),
        (dict(workers=0), "workers"),
        (dict(profile="fast"), "unknown profile 'fast'"),
    ]
    if not torch.cuda.is_available():
        cases.append((dict(device="cuda"), "device"))
    for kwargs, name in cases:
        kwargs = {"device": "cpu"} | kwargs
        with pytest.raises(ValueError, match=name):
            study_gpu.run(root, **kwargs)
    with pytest.raises(ValueError, match="phase1_max_steps"):
        study_gpu.main(["--root", str(root), "--device", "cpu", "--phase1-max-steps", "ten"])
    assert not root.exists()


def test_the_committed_row_set_ran_the_gpu_profile_on_a_gpu():
    """The committed GPU rows were made with notebook 04's gpu profile (phase 1 capped as recorded), on a CUDA card."""
    from brorl_lib.core.paths import REPO_ROOT
    from brorl_lib.core.registry import get_notebook

    root = REPO_ROOT / CountdownStudyConfig(**profile_values(get_notebook("04_laptop_rlvr"), "paper")).gpu_rows_dir
    record = json.loads((root / study_gpu.RECORD).read_text())
    assert record["device"] == "cuda" and record["card"].startswith("NVIDIA") and record["profile"] == "gpu"
    values = profile_values(get_notebook("04_laptop_rlvr"), "gpu") | record["parameters"] | {"device": "cpu"}
    cfg = CountdownStudyConfig(**values)
    expected = json.loads(json.dumps(asdict(cfg.study()) | {"quality": asdict(cfg.quality())}))
    if "bands" not in record["settings"]["plateau_rule"]:  # recorded before the rule checked bands (its phase 1
        expected["plateau_rule"].pop("bands")  # ran to its recorded cap, which no rule changes)
    if record["settings"]["quality"]["reps"] == 3:  # recorded before the profiles' design rose to 10 repetitions
        expected["quality"]["reps"] = 3
    assert record["settings"] | {"device": "cpu"} == expected


def test_a_row_set_reads_back_labelled_with_its_card_and_model(rows, tmp_path):
    from brorl_lib.rlvr import study_report as sr

    root, record = rows
    table = sr.gpu_quality(root)
    assert set(table["device"]) == {"cpu"} and set(table["model"]) == {record["candidate_key"]}
    assert len(table) == len(uq.summarise(pd.concat(pd.read_csv(f) for f in (root / "update_quality").glob("*.csv"))))
    with pytest.raises(ValueError, match="gpu_rows_dir=.* holds no GPU row set"):
        sr.gpu_quality(tmp_path)
