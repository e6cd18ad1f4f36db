"""The quality of one update per generated sample, measured on the model itself (the paper's one-step claim,
Theorem 1, at laptop scale).

At a checkpoint, for N rollouts per prompt and S generated samples per update (P = S/N prompts, one round),
each arm forms its actual update: the binary rewards, dynamic sampling's filter, the group-baseline advantage
and the PPO loss of ``step`` (verl's ``core_algos``). Two measures, per band of the prompts' exact q:

* ``cosine``: between the update's gradient direction at the checkpoint (minus the loss's gradient over the
  whole kept batch) and the exact gradient of the band's mean correct mass q (``exact_q``, teacher-forced);
* ``delta_q``: the exact change of the band's mean q after the real optimizer step (AdamW carrying the
  checkpoint's moments, the arm's mini-batches, gradient clipping) at the learning rate given.

q is measured on a fixed, seeded set of training prompts at the training temperature; its bands are set by q
at the checkpoint. Repetitions differ in the prompts drawn and the rollouts sampled. An update whose groups are
all filtered out is the zero vector: cosine 0 and no change of q (a wasted update, counted as such).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from brorl_lib.core import atomic
from brorl_lib.core.validation import check_int, check_positive
from brorl_lib.models import tiny
from brorl_lib.rlvr import algorithm as alg
from brorl_lib.rlvr import exact_q
from brorl_lib.rlvr.run import TRAINER_STATE
from brorl_lib.rlvr.sampling import concat
from brorl_lib.rlvr.step import StepSettings, backward, generation_round, rows_of
from brorl_lib.rlvr.tasks import LaptopInstance

ALL = "all"  # the band label of every measured prompt together


def check_bands(edges: list[float], name: str = "q_bands") -> None:
    """Band edges of q: at least two, inside [0, 1], strictly increasing."""
    if len(edges) < 2:
        raise ValueError(f"{name}={list(edges)} is not allowed: give at least two edges")
    for e in edges:
        if not 0.0 <= float(e) <= 1.0:
            raise ValueError(f"{name}={list(edges)} is not allowed: every edge must lie in [0, 1]")
    if any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"{name}={list(edges)} is not allowed: edges must be strictly increasing")


def band_labels(edges: list[float]) -> list[str]:
    return [f"[{a:.3g}, {b:.3g}{']' if k == len(edges) - 2 else ')'}" for k, (a, b) in enumerate(zip(edges, edges[1:]))]


EDGE_TOLERANCE = 1e-6  # a float sum of probabilities may pass an edge by rounding (1.0000001 is 1)


def band_of(q: np.ndarray, edges: list[float]) -> np.ndarray:
    """Band index of each q (the last band includes its upper edge; a q within EDGE_TOLERANCE outside the first or
    last edge counts as on it); -1 outside every band."""
    q = np.asarray(q, dtype=float)
    lo, hi = edges[0], edges[-1]
    inside = (q >= lo - EDGE_TOLERANCE) & (q <= hi + EDGE_TOLERANCE)
    idx = np.searchsorted(np.asarray(edges), np.clip(q, lo, hi), side="right") - 1
    idx[np.clip(q, lo, hi) == hi] = len(edges) - 2
    idx[~inside] = -1
    return idx


@dataclass(frozen=True)
class Cell:
    n_rollouts: int
    samples_per_update: int
    lr: float

    def __post_init__(self) -> None:
        check_int("n_rollouts", self.n_rollouts, low=2)
        check_int("samples_per_update", self.samples_per_update, low=self.n_rollouts)
        if self.samples_per_update % self.n_rollouts:
            raise ValueError(
                f"samples_per_update={self.samples_per_update} is not allowed with n_rollouts={self.n_rollouts}: "
                "it must be a multiple of N (P = S/N prompts)"
            )
        check_positive("lr", self.lr)

    @property
    def prompts(self) -> int:
        return self.samples_per_update // self.n_rollouts


def _flat_grad(model) -> torch.Tensor:
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in model.parameters()])


def _band_gradients(model, tokenizer, measured, bands, n_bands, temperature, max_new_tokens):
    """q of the measured prompts and the gradient of each band's mean q (and of all) as flat vectors."""
    q = exact_q.correct_mass(model, tokenizer, measured, temperature, max_new_tokens, grad=True)
    params = list(model.parameters())
    out = {}
    for b in [*range(n_bands), ALL]:
        pick = np.arange(len(measured)) if b == ALL else np.flatnonzero(bands == b)
        if len(pick) == 0:
            continue
        grads = torch.autograd.grad(q[torch.as_tensor(pick)].mean(), params, retain_graph=True, allow_unused=True)
        out[b] = torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, params)])
    return q.detach(), out


def _band_means(q: torch.Tensor, bands: np.ndarray, n_bands: int) -> dict:
    present = [b for b in range(n_bands) if (bands == b).any()]
    out = {b: float(q[torch.as_tensor(np.flatnonzero(bands == b))].mean()) for b in present}
    out[ALL] = float(q.mean())
    return out


@dataclass(frozen=True)
class Reference:
    """What every update at one checkpoint is compared with: q of the measured prompts, their bands and the
    exact gradient of each band's mean q (computed once per checkpoint)."""

    q: torch.Tensor
    bands: np.ndarray
    n_bands: int
    gradients: dict
    labels: tuple[str, ...]  # of the bands, then ALL


def reference(checkpoint: Path, measured: list[LaptopInstance], edges: list[float], step: StepSettings, device="cpu"):
    check_bands(edges)
    policy, tok = tiny.load(checkpoint, device)
    policy.eval()
    with torch.no_grad():
        q = exact_q.correct_mass(policy, tok, measured, step.temperature, step.max_new_tokens)
    bands = band_of(q.cpu().numpy(), edges)
    _, grads = _band_gradients(policy, tok, measured, bands, len(edges) - 1, step.temperature, step.max_new_tokens)
    return Reference(q, bands, len(edges) - 1, grads, (*band_labels(edges), ALL))


def one_update(
    checkpoint: Path,
    train: list[LaptopInstance],
    refs: dict[str, tuple[list[LaptopInstance], Reference]],
    cell: Cell,
    step: StepSettings,
    seed: int,
    device: str = "cpu",
) -> list[dict]:
    """One repetition of one cell at one checkpoint: the update drawn from ``train``; per task of ``refs`` (its
    measured prompts and reference) and band, the cosine and the exact change of mean q; also the kept fraction
    of the S generated samples."""
    policy, tok = tiny.load(checkpoint, device)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cell.lr)
    optimizer.load_state_dict(torch.load(Path(checkpoint) / TRAINER_STATE, weights_only=False)["optimizer"])
    for group in optimizer.param_groups:
        group["lr"] = cell.lr
    policy.eval()
    generator = torch.Generator().manual_seed(seed)
    prompts = [train[i] for i in torch.randint(len(train), (cell.prompts,), generator=generator).tolist()]
    rollouts, rewards, keep = generation_round(policy, tok, prompts, step, generator)
    rows = []
    kept_fraction = float(keep.float().mean())
    update = None
    if keep.any():
        kept = concat([rows_of(rollouts, torch.nonzero(keep).squeeze(1))], tok.pad_token_id)
        adv = alg.advantages(step.advantage_estimator, rewards[keep], kept.response_mask, kept.group)
        policy.train()
        # the same draws on every device; the rows' device for the chunks (``_distinct`` indexes with them)
        order = torch.randperm(len(kept.texts), generator=generator).to(kept.group.device)
        chunks = [c for c in torch.tensor_split(order, step.mini_batches) if len(c)]
        grads = []  # each mini-batch's gradient at the checkpoint: the first is the first real step's
        for chunk in chunks:
            policy.zero_grad()
            backward(policy, kept, adv, kept.log_probs, None, chunk, step)
            grads.append(_flat_grad(policy))
        total = float(kept.response_mask.sum())
        weights = [float(kept.response_mask[c].sum()) / total for c in chunks]
        update = -sum(w * g for w, g in zip(weights, grads))  # descent direction of the whole batch's token mean
        for k, chunk in enumerate(chunks):  # the real step: mini-batch k's gradient at the parameters of step k
            if k:
                policy.zero_grad()
                backward(policy, kept, adv, kept.log_probs, None, chunk, step)
            else:
                _set_grad(policy, grads[0])
            torch.nn.utils.clip_grad_norm_(policy.parameters(), step.grad_clip)
            optimizer.step()
        policy.eval()
    for task, (measured, ref) in refs.items():
        with torch.no_grad():
            q1 = exact_q.correct_mass(policy, tok, measured, step.temperature, step.max_new_tokens)
        before, after = _band_means(ref.q, ref.bands, ref.n_bands), _band_means(q1, ref.bands, ref.n_bands)
        for b, g in ref.gradients.items():
            cos = float(torch.nn.functional.cosine_similarity(update, g, dim=0)) if update is not None else 0.0
            rows.append(
                {
                    "task": task,
                    "q_band": ref.labels[b] if b != ALL else ALL,
                    "prompts_in_band": int(len(measured) if b == ALL else (ref.bands == b).sum()),
                    "cosine": cos,
                    "delta_q": after[b] - before[b],
                    "q_before": before[b],
                    "kept_fraction": kept_fraction,
                }
            )
    return rows


def _set_grad(model, flat: torch.Tensor) -> None:
    offset = 0
    for p in model.parameters():
        p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
        offset += p.numel()


def summarise(raw: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard error over repetitions of each checkpoint x reference design x task x N x S x q band."""
    keys = ["checkpoint", "reference", "task", "n_rollouts", "samples_per_update", "q_band"]
    raw = with_reference(raw)

    def se(x: pd.Series) -> float:
        return x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else np.nan

    return (
        raw.groupby(keys, sort=False)
        .agg(
            cosine=("cosine", "mean"),
            cosine_se=("cosine", se),
            delta_q=("delta_q", "mean"),
            delta_q_se=("delta_q", se),
            reps=("cosine", "size"),
            prompts_in_band=("prompts_in_band", "first"),
            kept_fraction=("kept_fraction", "mean"),
        )
        .reset_index()
    )


RAW_COLUMNS = ["checkpoint", "n_rollouts", "samples_per_update", "rep", "reference", "lr"]
# "disjoint": the updates draw from training prompts none of which is measured; "overlapping": they may draw a
# measured prompt (the design before; rows saved without the column were made so)
REFERENCES = ("disjoint", "overlapping")


def reference_kind(train: list[LaptopInstance], measured: dict[str, list[LaptopInstance]]) -> str:
    """Whether an update's prompts (drawn from ``train``) can be among the measured ones, by prompt text."""
    judged = {m.prompt for group in measured.values() for m in group}
    return REFERENCES[0] if judged.isdisjoint(t.prompt for t in train) else REFERENCES[1]


STATS_PREFIX = "gradients-"  # the per-prompt gradient statistics beside the grids (study.gradient_stats_stage)


def grid_files(folder: Path) -> list[Path]:
    """The saved grids of an ``update_quality`` folder, one per checkpoint (not the gradient statistics)."""
    return sorted(p for p in Path(folder).glob("*.csv") if not p.name.startswith(STATS_PREFIX))


def with_reference(raw: pd.DataFrame) -> pd.DataFrame:
    """``raw`` with its ``reference`` column: rows made before the column are of the overlapping design."""
    if "reference" in raw:
        return raw
    raw = raw.copy()
    raw.insert(min(RAW_COLUMNS.index("reference"), raw.shape[1]), "reference", REFERENCES[1])
    return raw


def read_raw(path: Path) -> pd.DataFrame:
    """A saved grid (``with_reference``)."""
    return with_reference(pd.read_csv(path))


def run_grid(
    checkpoints: dict[str, tuple[Path, list[LaptopInstance], dict[str, list[LaptopInstance]], Callable[[int], float]]],
    edges: list[float],
    rollouts: list[int],
    samples: list[int],
    reps: int,
    step_of: Callable[[int], StepSettings],
    folder: Path,
    device: str = "cpu",
    progress: bool = True,
) -> pd.DataFrame:
    """Every checkpoint x N x S x repetition, each saved as it finishes (``folder/<checkpoint>.csv``, rewritten
    atomically; a finished unit is never recomputed). ``checkpoints``: name -> (checkpoint folder, training
    prompts the updates draw from, measured prompts per task, ``lr_of(S)``: the learning rate of an update of S
    samples under that run's rule); repetition r draws with seed r. Returns every raw row."""
    check_bands(edges)
    check_int("reps", reps, low=1)
    for s in samples:
        for n in rollouts:
            Cell(n, s, 1.0)  # S not a multiple of N: refused before any work
    frames = []
    for name, (path, train, measured, lr_of) in checkpoints.items():
        cells = [Cell(n, s, lr_of(s)) for s in samples for n in rollouts]
        target = Path(folder) / f"{name}.csv"
        done = read_raw(target) if target.exists() else pd.DataFrame(columns=RAW_COLUMNS)
        kind = reference_kind(train, measured)
        finished = set(map(tuple, done[RAW_COLUMNS[1:5]].drop_duplicates().itertuples(index=False)))
        todo = [(c, r) for c in cells for r in range(reps)
                if (c.n_rollouts, c.samples_per_update, r, kind) not in finished]  # fmt: skip
        refs = None
        for cell, r in tqdm(todo, desc=f"update quality at {name}", disable=not progress, unit="update"):
            if refs is None:  # once per checkpoint, and only when there is work
                refs = {t: (m, reference(path, m, edges, step_of(16), device)) for t, m in measured.items()}
            rows = one_update(path, train, refs, cell, step_of(cell.n_rollouts), r, device)
            keys = dict(checkpoint=name, n_rollouts=cell.n_rollouts, samples_per_update=cell.samples_per_update)
            new = pd.DataFrame([keys | {"rep": r, "reference": kind, "lr": cell.lr} | row for row in rows])
            done = new if done.empty else pd.concat([done, new], ignore_index=True)
            atomic.write_text(target, done.to_csv(index=False, lineterminator="\n"))
        frames.append(done)
    return pd.concat(frames, ignore_index=True)
