import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brorl_lib.facts import theorem as theory


def small_batch():
    p = np.array([0.4, 0.3, 0.2, 0.1])
    correct = np.array([True, False, True, False])
    sampled = np.array([True, True, False, False])
    return p, correct, sampled


def test_mass_balance_by_hand():
    p, correct, sampled = small_batch()
    mb = theory.mass_balance(p, correct, sampled, r_c=1.0, r_w=-0.5)
    assert mb.q_pos == pytest.approx(0.6)
    assert mb.q_neg == pytest.approx(0.4)
    assert mb.p_pos == pytest.approx(0.4) and mb.p_neg == pytest.approx(0.3)
    assert mb.a2 == pytest.approx(0.16) and mb.b2 == pytest.approx(0.09)
    assert mb.u_pos2 == pytest.approx(0.04) and mb.u_neg2 == pytest.approx(0.01)
    assert mb.s_r == pytest.approx(1.0 * 0.4 - 0.5 * 0.3)


def test_logit_update_by_hand_and_directions():
    p, correct, sampled = small_batch()
    dz = theory.logit_update(p, correct, sampled, 1.0, -0.5, eta=0.1, n=2)
    s_r = 0.25
    expected = 0.05 * p * (np.array([1.0, -0.5, 0.0, 0.0]) - s_r)
    np.testing.assert_allclose(dz, expected)
    assert dz[0] > 0 and dz[1] < 0  # sampled correct up, sampled incorrect down
    assert (dz[2:] < 0).all()  # S_R > 0: every unsampled logit goes down


def test_theorem1_terms_by_hand():
    p, correct, sampled = small_batch()
    mb = theory.mass_balance(p, correct, sampled, 1.0, -0.5)
    terms = theory.theorem1_terms(mb, 1.0, -0.5, eta=0.1, n=2)
    s = 0.25
    assert terms["sampled_correct"] == pytest.approx(0.05 * (1 - s) * 0.4 * 0.16)
    assert terms["sampled_incorrect"] == pytest.approx(0.05 * (s + 0.5) * 0.6 * 0.09)
    assert terms["unsampled"] == pytest.approx(0.05 * s * (0.6 * 0.01 - 0.4 * 0.04))


@st.composite
def batches(draw):
    v = draw(st.integers(2, 40))
    z = np.array(draw(st.lists(st.floats(-6, 6), min_size=v, max_size=v)))
    correct = np.array(draw(st.lists(st.booleans(), min_size=v, max_size=v)))
    sampled = np.array(draw(st.lists(st.booleans(), min_size=v, max_size=v)))
    # rewards are 0 or of ordinary size: subnormal floats have no relative precision to test
    r_c = draw(st.one_of(st.just(0.0), st.floats(1e-6, 3)))
    r_w = -draw(st.one_of(st.just(0.0), st.floats(1e-6, 3)))
    n = draw(st.integers(1, 1000))
    eta = draw(st.floats(1e-6, 1.0))
    return theory.softmax(z), correct, sampled, r_c, r_w, n, eta


@settings(max_examples=300, deadline=None)
@given(batches())
def test_theorem1_equals_first_order_change(batch):
    p, correct, sampled, r_c, r_w, n, eta = batch
    mb = theory.mass_balance(p, correct, sampled, r_c, r_w)
    terms = theory.theorem1_terms(mb, r_c, r_w, eta, n)
    dz = theory.logit_update(p, correct, sampled, r_c, r_w, eta, n)
    scale = theory.rounding_scale(terms, p, correct, dz)
    first = theory.delta_q_first_order(p, correct, dz)
    assert abs(sum(terms.values()) - first) <= 1e-12 * scale
    # non-negative in exact arithmetic; allow rounding of the sums (S_R may exceed R_c by an ulp)
    assert min(terms["sampled_correct"], terms["sampled_incorrect"]) >= -1e-15 * scale
    ids = theory.proof_identities(p, correct, sampled, r_c, r_w, eta, n)
    assert ids["all_lhs"] == pytest.approx(ids["all_rhs"], rel=1e-10, abs=1e-12 * scale)
    assert ids["correct_lhs"] == pytest.approx(ids["correct_rhs"], rel=1e-10, abs=1e-12 * scale)


def test_exact_change_gap_is_second_order():
    rng = np.random.default_rng(0)
    inst = theory.random_instance(rng, [1000], [16], families=("zipf",))
    res = theory.error_vs_step_size(inst, np.array([1e-2, 1e-3]))
    assert res["abs_err"][0] / res["abs_err"][1] == pytest.approx(100, rel=0.01)
    assert theory.fitted_order(res["eta"], res["abs_err"]) == pytest.approx(2.0, abs=0.01)


def test_exact_change_matches_direct_softmax():
    rng = np.random.default_rng(1)
    z = rng.normal(size=50)
    correct = rng.random(50) < 0.3
    dz = rng.normal(scale=0.5, size=50)
    direct = theory.softmax(z + dz)[correct].sum() - theory.softmax(z)[correct].sum()
    assert theory.delta_q_exact(theory.softmax(z), correct, dz) == pytest.approx(direct, rel=1e-10)


def test_sampling_is_seeded_and_counts_distinct_tokens():
    p = theory.zipf_probabilities(1000, 1.1)
    a = theory.sample_tokens(p, 64, np.random.default_rng(3))
    b = theory.sample_tokens(p, 64, np.random.default_rng(3))
    assert (a == b).all() and 1 <= a.sum() <= 64


def test_lemma2_monte_carlo_interval_covers_formula():
    res = theory.lemma2_monte_carlo(0.01, 100, 200_000, np.random.default_rng(0))
    assert res["ci_low"] <= res["analytic"] <= res["ci_high"]
    assert res["analytic"] == pytest.approx(0.01**2 * 0.99**100)


def test_corollary3_is_sum_of_lemma2_and_decreases():
    p = theory.zipf_probabilities(500, 1.0)
    ns = np.array([1, 10, 100, 1000])
    total = theory.expected_unsampled_moment(p, ns)
    np.testing.assert_allclose(total, [theory.lemma2_expectation(p, n).sum() for n in ns], rtol=1e-12)
    assert (np.diff(total) < 0).all()
    mask = np.arange(500) % 3 == 0
    np.testing.assert_allclose(
        theory.expected_unsampled_moment(p, ns, mask) + theory.expected_unsampled_moment(p, ns, ~mask),
        total,
        rtol=1e-12,
    )


def test_pass_at_k_increases_in_q():
    q = np.linspace(0, 1, 11)
    assert (np.diff(theory.pass_at_k_from_mass(q, 8)) > 0).all()
    assert theory.pass_at_k_from_mass(0.5, 1) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda p, c, s: theory.logit_update(p, c, s, 1.0, -1.0, eta=1e-3, n=0), "n_rollouts"),
        (lambda p, c, s: theory.logit_update(p, c, s, 1.0, -1.0, eta=0.0, n=4), "eta"),
        (lambda p, c, s: theory.mass_balance(p, c, s, -0.1, -1.0), "r_correct"),
        (lambda p, c, s: theory.mass_balance(p, c, s, 1.0, 0.5), "r_wrong"),
        (lambda p, c, s: theory.random_logits(1, "zipf", np.random.default_rng()), "vocab_size"),
        (lambda p, c, s: theory.random_logits(10, "gauss", np.random.default_rng()), "family"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    p, correct, sampled = small_batch()
    with pytest.raises(ValueError, match=name):
        call(p, correct, sampled)
