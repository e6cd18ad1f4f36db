"""Theorem 1's quantities measured on the tiny model's own response distribution.

The paper's analysis treats one prompt as one decision over a vocabulary. Here the "vocabulary" of a
prompt is the set of distinct whole responses found among many draws from the policy, each with its
exact probability at the sampling temperature (the sum of its token log-probs, <eos> included),
renormalised over the responses found (the share of mass they cover is reported). A response is
correct when its verifier score reaches full credit, 1 (``brorl_lib.tasks.credit.passed``; R_c = +1),
and incorrect otherwise (R_w = -1), as in the simulator. Batches of N i.i.d. draws from that distribution
then give S_R, A_2, B_2, U_pos,2, U_neg,2 and Theorem 1's predicted change of the correct mass, exactly
as `brorl_lib.theory.formulas` defines them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from brorl_lib.core.validation import check_int, check_int_list, check_positive
from brorl_lib.paper import setup as paper_setup
from brorl_lib.rlvr.sampling import generate
from brorl_lib.rlvr.tasks import LaptopInstance, score
from brorl_lib.tasks.credit import passed
from brorl_lib.theory import formulas as theory

R_CORRECT, R_WRONG = paper_setup.SIM_REWARD_CORRECT, paper_setup.SIM_REWARD_INCORRECT  # the simulator's (§4.1)


@dataclass(frozen=True)
class MassBalanceSettings:
    prompts: int  # training prompts analysed
    reference_samples: int  # draws per prompt that find its responses
    batches: int  # random batches per prompt and N
    rollouts: tuple[int, ...]  # the N values
    temperature: float
    max_new_tokens: int
    seed: int

    def __post_init__(self) -> None:
        check_int("prompts", self.prompts, low=1)
        check_int("reference_samples", self.reference_samples, low=2)
        check_int("batches", self.batches, low=1)
        check_int_list("rollouts", list(self.rollouts), low=1)
        check_positive("temperature", self.temperature)
        check_int("max_new_tokens", self.max_new_tokens, low=1)
        check_int("seed", self.seed, low=0)


def response_distribution(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    instance: LaptopInstance,
    samples: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
) -> pd.DataFrame:
    """Distinct responses to one prompt: text, whether it ended with <eos>, exact probability, score."""
    with torch.no_grad():
        r = generate(
            model,
            tokenizer,
            [instance.prompt],
            samples,
            max_new_tokens,
            temperature,
            torch.Generator().manual_seed(seed),
        )
    eos = (r.response_ids == tokenizer.eos_token_id).any(1).cpu().numpy()
    logp = r.log_probs.sum(1).double().cpu().numpy()
    found = pd.DataFrame({"response": r.texts, "ended": eos, "logp": logp}).drop_duplicates(["response", "ended"])
    found["p_exact"] = np.exp(found["logp"])
    found["score"] = [score(instance, t) for t in found["response"]]
    found["correct"] = passed(found["score"])
    return found.sort_values("p_exact", ascending=False, ignore_index=True)


def batch_quantities(
    p: np.ndarray, correct: np.ndarray, rollouts: tuple[int, ...], batches: int, rng: np.random.Generator
) -> pd.DataFrame:
    """Theorem 1 on ``batches`` random batches of each N drawn from ``p``; one row per (N, batch).

    ``delta_q`` and the three terms are per unit learning rate (eta = 1), i.e. already divided by N.
    """
    rows = []
    for n in rollouts:
        for b in range(batches):
            sampled = np.zeros(len(p), dtype=bool)
            sampled[rng.choice(len(p), size=n, p=p)] = True
            mb = theory.mass_balance(p, correct, sampled, R_CORRECT, R_WRONG)
            terms = theory.theorem1_terms(mb, R_CORRECT, R_WRONG, 1.0, n)
            rows.append(
                {
                    "N": n,
                    "batch": b,
                    "s_r": mb.s_r,
                    "u_pos2": mb.u_pos2,
                    "u_neg2": mb.u_neg2,
                    "sampled_correct": terms["sampled_correct"],
                    "sampled_incorrect": terms["sampled_incorrect"],
                    "unsampled": terms["unsampled"],
                    "delta_q": sum(terms.values()),
                    "distinct": int(sampled.sum()),
                }
            )
    return pd.DataFrame(rows)


def analyse(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    instances: list[LaptopInstance],
    settings: MassBalanceSettings,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-prompt response supports and per-batch Theorem 1 quantities for ``settings.prompts`` prompts
    chosen at random (seeded) from ``instances``."""
    rng = np.random.default_rng(settings.seed)
    picks = rng.choice(len(instances), size=min(settings.prompts, len(instances)), replace=False)
    supports, batches = [], []
    for k, i in enumerate(sorted(picks.tolist())):
        inst = instances[i]
        found = response_distribution(
            model,
            tokenizer,
            inst,
            settings.reference_samples,
            settings.temperature,
            settings.max_new_tokens,
            settings.seed + k,
        )
        coverage = float(found["p_exact"].sum())
        p = found["p_exact"].to_numpy() / coverage
        correct = found["correct"].to_numpy()
        supports.append(
            {
                "prompt": inst.prompt,
                "task": inst.task,
                "distinct": len(found),
                "coverage": coverage,
                "q_pos": float(p[correct].sum()),
                "top_p": float(p[0]),
                "top_correct": bool(correct[0]),
                "support_90": int(np.searchsorted(np.cumsum(p), 0.9) + 1),
            }
        )
        b = batch_quantities(p, correct, settings.rollouts, settings.batches, rng)
        ns = np.array(settings.rollouts)
        expected = pd.DataFrame(
            {
                "N": ns,
                "expected_u_pos2": theory.expected_unsampled_moment(p, ns, correct),
                "expected_u_neg2": theory.expected_unsampled_moment(p, ns, ~correct),
                "expected_distinct": drawn_at_least_once(p, ns).sum(axis=1),
            }
        )
        batches.append(b.merge(expected, on="N").assign(prompt=inst.prompt, task=inst.task))
    return pd.DataFrame(supports), pd.concat(batches, ignore_index=True)


def summary(batches: pd.DataFrame) -> pd.DataFrame:
    """Per N over all prompts and batches: share of batches whose predicted change is negative, mean terms."""
    g = batches.assign(sampled=batches["sampled_correct"] + batches["sampled_incorrect"]).groupby("N")
    out = pd.DataFrame(
        {
            "share_negative": g["delta_q"].apply(lambda d: float((d < 0).mean())),
            "mean_delta_q": g["delta_q"].mean(),
            "mean_unsampled": g["unsampled"].mean(),
            "mean_sampled": g["sampled"].mean(),
            "mean_s_r": g["s_r"].mean(),
            "expected_u2": g["expected_u_pos2"].mean() + g["expected_u_neg2"].mean(),
            "mean_distinct": g["distinct"].mean(),
        }
    )
    return out.reset_index()


def drawn_at_least_once(p: np.ndarray, rollouts) -> np.ndarray:
    """1 - (1 - p)^N for every N (rows) and probability (columns), computed without cancellation."""
    p = np.minimum(np.asarray(p, dtype=np.float64), 1.0 - 1e-300)[None, :]
    n = np.asarray(rollouts, dtype=np.float64)[:, None]
    return -np.expm1(n * np.log1p(-p))


def groups_with_correct(q_pos: np.ndarray, rollouts) -> np.ndarray:
    """Mean over prompts of 1 - (1 - Q_pos)^N: the chance a group of N holds a correct response, i.e. that a
    binary-reward group carries a learning signal through dynamic sampling (unless every response is correct)."""
    return drawn_at_least_once(q_pos, rollouts).mean(axis=1)
