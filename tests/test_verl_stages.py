"""The staged plan (docs/gpu-and-clusters.md): each stage's launch composes into a config verl accepts, with the
stage's shape, and the docs show its command and the plan's estimate of its hours."""

import pytest

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.verl_recipe import configs, record, stages

DOCS = REPO_ROOT / "docs" / "gpu-and-clusters.md"


@pytest.mark.parametrize("stage", stages.STAGES, ids=lambda s: s.name)
def test_each_stage_composes_to_its_shape_and_verl_accepts_it(stage):
    smoke = (record.RECORD_DIR / "smoke" / stage.arm / "overrides.txt").read_text().splitlines()
    placeholders = {f"<{v}>": f"/x/{v.lower()}" for v in record.VARIABLES}
    launched = [configs_line(line, placeholders) for line in smoke] + ["trainer.total_training_steps=2"]
    cfg = configs.compose(launched + stages.extra_overrides(stage))  # as launch_arm.sh passes them: the last wins
    configs.validate(cfg)
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (stage.nnodes, stage.n_gpus_per_node)
    assert (cfg.data.train_batch_size, cfg.actor_rollout_ref.rollout.n) == (stage.prompts, stage.n_rollouts)
    assert cfg.trainer.total_training_steps == 1 and cfg.trainer.val_before_train is False
    assert cfg.data.max_response_length == configs.MAX_RESPONSE_LENGTH  # the paper's full length
    full = configs.PAPER_ARMS[stage.arm][1]
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size * full == stage.prompts * int(
        [s for s in smoke if s.startswith("actor_rollout_ref.actor.ppo_mini_batch_size=")][0].split("=")[1]
    )  # the arm's mini-batch count kept


def configs_line(line: str, placeholders: dict[str, str]) -> str:
    for key, value in placeholders.items():
        line = line.replace(key, value)
    return line


def test_docs_show_each_stage_with_the_plans_estimate():
    docs = DOCS.read_text()
    section = docs.split("### A staged plan", 1)[1].split("\n### ", 1)[0]
    hours = {s.name: stages.plan_row(s).expected_hours for s in stages.STAGES}
    for stage in stages.STAGES:
        assert stages.command(stage) in section
        assert f"estimate {hours[stage.name]:.2f} h" in section and "estimate" in section
    assert f"{hours['node-brorl']:.2f} h + {hours['node-prorl']:.2f} h of steps" in section
    assert 0.5 < hours["node-brorl"] + hours["node-prorl"] < 2  # "about an hour" holds by the plan's own estimate
