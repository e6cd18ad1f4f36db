"""Theorem 1 derived symbolically with sympy on a small vocabulary of symbolic probabilities.

Tokens are split into the four classes of the proof: sampled correct (A), sampled incorrect (B),
unsampled correct and unsampled incorrect. Every check returns the simplified residual
(left side minus right side), which is 0 when the identity holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from brorl_lib.core.validation import check_int

CLASSES = ("A", "B", "U_pos", "U_neg")


@dataclass(frozen=True)
class Derivation:
    class_sizes: dict[str, int]
    residuals: dict[str, sp.Expr]  # each 0 when the identity holds
    latex: dict[str, str]  # the general statements, in the paper's notation

    @property
    def all_hold(self) -> bool:
        return all(r == 0 for r in self.residuals.values())


def softmax_jacobian_residual(vocab_size: int = 3) -> sp.Expr:
    """Sum of |d softmax_i / d z_j - p_i (delta_ij - p_j)| after simplification (0 if it holds)."""
    check_int("vocab_size", vocab_size, low=2, high=6)
    z = sp.symbols(f"z_1:{vocab_size + 1}", real=True)
    denom = sum(sp.exp(zi) for zi in z)
    p = [sp.exp(zi) / denom for zi in z]
    total = sp.Integer(0)
    for i in range(vocab_size):
        for j in range(vocab_size):
            total += sp.simplify(sp.diff(p[i], z[j]) - p[i] * (int(i == j) - p[j])) ** 2
    return sp.simplify(total)


def _general_latex() -> dict[str, str]:
    eta, n, rc, rw, s = sp.symbols(r"\eta N R_c R_w S_R")
    q_pos, q_neg, a2, b2, up2, un2, u2 = sp.symbols(r"Q_{pos} Q_{neg} A_2 B_2 U_{pos\,2} U_{neg\,2} U_2")
    pj, rj = sp.symbols("p_j R_j")
    theorem = eta / n * ((rc - s) * q_neg * a2 + (s - rw) * q_pos * b2 + s * (q_pos * un2 - q_neg * up2))
    return {
        "update": rf"\Delta z_j = {sp.latex(eta / n * pj * (rj - s))}",
        "identity_all": r"\sum_{j=1}^{V} p_j \Delta z_j = "
        + sp.latex(eta / n * ((rc - s) * a2 + (rw - s) * b2 - s * u2)),
        "identity_correct": r"\sum_{i \in \mathcal{P}} p_i \Delta z_i = "
        + sp.latex(eta / n * ((rc - s) * a2 - s * up2)),
        "theorem": r"\Delta Q_{pos} = " + sp.latex(theorem, order="none"),
    }


def derive(a: int = 2, b: int = 2, u_pos: int = 1, u_neg: int = 2) -> Derivation:
    """Check the proof's two identities and Theorem 1 exactly, for class sizes ``a, b, u_pos, u_neg``.

    Theorem 1 needs the probabilities on the simplex: the last probability is replaced by
    1 - (sum of the others) before simplifying.
    """
    sizes = {"A": a, "B": b, "U_pos": u_pos, "U_neg": u_neg}
    for k, v in sizes.items():
        check_int(f"class size {k}", v, low=1, high=4)
    labels = [c for c in CLASSES for _ in range(sizes[c])]
    p = sp.symbols(f"p_1:{len(labels) + 1}", positive=True)
    eta, n = sp.symbols("eta N", positive=True)
    rc, rw = sp.symbols("R_c R_w", real=True)

    def total(cls: tuple[str, ...], power: int = 1) -> sp.Expr:
        return sum((pi**power for pi, lab in zip(p, labels) if lab in cls), sp.Integer(0))

    s_r = rc * total(("A",)) + rw * total(("B",))
    reward = {"A": rc, "B": rw, "U_pos": 0, "U_neg": 0}
    dz = [eta / n * pi * (reward[lab] - s_r) for pi, lab in zip(p, labels)]
    correct = [lab in ("A", "U_pos") for lab in labels]
    a2, b2 = total(("A",), 2), total(("B",), 2)
    up2, un2 = total(("U_pos",), 2), total(("U_neg",), 2)
    q_pos, q_neg = total(("A", "U_pos")), total(("B", "U_neg"))

    sum_all = sum(pi * d for pi, d in zip(p, dz))
    sum_correct = sum(pi * d for pi, d, c in zip(p, dz, correct) if c)
    # first-order change from the softmax Jacobian: sum_{i in P} sum_j p_i (delta_ij - p_j) dz_j
    delta_q = sum(p[i] * (int(i == j) - p[j]) * dz[j] for i in range(len(p)) if correct[i] for j in range(len(p)))
    closed = eta / n * ((rc - s_r) * q_neg * a2 + (s_r - rw) * q_pos * b2 + s_r * (q_pos * un2 - q_neg * up2))
    on_simplex = {p[-1]: 1 - sum(p[:-1])}
    residuals = {
        "identity_all": sp.expand(sum_all - eta / n * ((rc - s_r) * a2 + (rw - s_r) * b2 - s_r * (up2 + un2))),
        "identity_correct": sp.expand(sum_correct - eta / n * ((rc - s_r) * a2 - s_r * up2)),
        "theorem1": sp.expand((delta_q - closed).subs(on_simplex)),
    }
    return Derivation(sizes, residuals, _general_latex())
