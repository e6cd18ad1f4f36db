"""Notebook 05's explore section: the cluster plan as its shape changes.

Nodes, GPUs per node, N and prompts per step of each arm are ``VerlTrainingConfig``'s declared parameters
(``explore.controls``), checked by the same config checks. The figure shows samples per step and the estimated
hours (Table 1's reported hours per step, scaled linearly: an estimate, labelled so); below it, the keys
where the chosen arm's composed verl config differs from verl's own ``ppo_trainer.yaml``.
"""

from __future__ import annotations

import html

import ipywidgets as w
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.explore.controls import ConfigControls, powers_of_two
from brorl_lib.explore.interact import Explorer, Explorers
from brorl_lib.figures import palette
from brorl_lib.figures.plotting import new_figure, pt
from brorl_lib.verl_recipe import configs
from brorl_lib.verl_recipe import report as vr

PROVENANCE = "estimate"  # as notebook 05's plan table: Table 1's and Table 2's reported rows, scaled (vr.PLAN_BASIS)


def default_config():
    """verl's own ``ppo_trainer.yaml`` with no override (composed once per call: about 0.4 s)."""
    return configs.compose([])


def diff_from_defaults(cfg: vr.VerlTrainingConfig, arm_name: str) -> pd.DataFrame:
    """Keys where ``arm_name``'s composed config differs from verl's defaults (paths shown machine-independent)."""
    data = cfg.work_path() / "data"
    cluster = cfg.cluster((str(data / "train.parquet"),), (str(data / "val.parquet"),))
    arm = {a.name: a for a in cfg.arm_specs()}[arm_name]
    composed = configs.compose(configs.overrides(arm, cfg.base_arm, cluster))
    diff = configs.config_diff({"verl default": default_config(), arm_name: composed})

    def show(v):
        text = str(v)
        return text.replace(str(REPO_ROOT), "<repo>")

    return diff.assign(**{arm_name: diff[arm_name].map(show)})


def plan_figure(plan: pd.DataFrame) -> plt.Figure:
    """Samples per step (kept, and generated before dynamic sampling) and estimated hours, per arm."""
    fig, (ax_s, ax_h) = new_figure("full", aspect=0.3, ncols=2)
    x = np.arange(len(plan))
    colours = [palette.arm(vr.ARM_LABELS[a]) for a in plan["arm"]]
    ax_s.bar(x - 0.2, plan["kept_samples_per_step"], 0.4, color=colours, label="kept (N x prompts)")
    ax_s.bar(x + 0.2, plan["expected_samples_per_step"], 0.4, color=colours, alpha=0.45, label="generated (estimate)")
    ax_s.set_ylabel("samples per step")
    ax_s.legend(fontsize=pt(6))
    ax_h.bar(x, plan["expected_hours"], 0.5, color=colours)
    for xi, (h, g) in enumerate(zip(plan["expected_hours"], plan["gpus"])):
        ax_h.text(xi, h, f"{h:,.0f} h\n{h * g:,.0f} GPU-h", ha="center", va="bottom", fontsize=pt(6))
    ax_h.set_ylabel("hours (estimate)")
    ax_h.set_title("estimate from Table 1's reported hours per step, scaled linearly", loc="left", fontsize=pt(7))
    for ax in (ax_s, ax_h):
        ax.set_xticks(
            x,
            [
                f"{vr.ARM_LABELS[a]}\nN={n}, {p} prompts"
                for a, n, p in plan[["arm", "N", "prompts_per_step"]].itertuples(index=False)
            ],
        )
        ax.margins(y=0.2)
    return fig


def diff_html(diff: pd.DataFrame, arm_name: str) -> str:
    rows = "".join(
        f"<tr><td><code>{html.escape(str(r.key))}</code></td><td>{html.escape(str(r[1]))}</td>"
        f"<td>{html.escape(str(r[2]))}</td></tr>"
        for r in diff.itertuples(index=False)
    )
    return (
        f"<details><summary>{len(diff)} keys where the composed {html.escape(arm_name)} config differs from "
        "verl's defaults</summary><table><tr><th>key</th><th>verl default</th>"
        f"<th>{html.escape(arm_name)}</th></tr>{rows}</table></details>"
    )


def plan_explorer(cfg: vr.VerlTrainingConfig) -> Explorer:
    rollouts = {"options": powers_of_two(cfg.parameter("prorl_rollouts"), low=4, high=4096)}
    prompts = {"options": powers_of_two(cfg.parameter("prorl_prompts_per_step"), low=16, high=4096)}
    controls = ConfigControls(
        cfg,
        {
            "nnodes": {"low": 1, "high": 64},
            "n_gpus_per_node": {"options": (1, 2, 4, 8, 16)},
            "prorl_rollouts": rollouts,
            "prorl_prompts_per_step": prompts,
            "brorl_rollouts": rollouts,
            "brorl_prompts_per_step": prompts,
        },
        extra={"diff_arm": w.Dropdown(options=list(cfg.arms), value=cfg.arms[-1], description="config diff of")},
    )

    def draw(params: dict):
        c = params["_config"]
        fig = plan_figure(vr.plan_table(c))
        return fig, diff_html(diff_from_defaults(c, params["diff_arm"]), params["diff_arm"])

    return Explorer(
        draw,
        controls.all,
        read=controls.read,
        name="verl_plan_view",
        provenance=PROVENANCE,
        basis=vr.PLAN_BASIS,
        caption="Cluster plan: samples per step and estimated hours (from Table 1's reported hours per step)",
    )


def explore(cfg: vr.VerlTrainingConfig) -> Explorers:
    return Explorers({"cluster plan": plan_explorer(cfg)})
