"""One palette with meaning (an arm and its N share one colour everywhere) and the provenance classes a figure
may carry."""

from __future__ import annotations

import pytest

from brorl_lib.core.artifacts import PROVENANCE, check_artifact, class_text, stamp_text
from brorl_lib.figures import palette


# --- the palette ---
def test_the_paper_arms_and_their_n_share_one_colour_everywhere():
    assert palette.n_colour(16) == palette.arm("ProRL") != palette.arm("BroRL") == palette.n_colour(512)
    fixed = [palette.n_colour(n) for n in palette.N_COLOURS]
    assert len(set(fixed)) == len(fixed)  # every N the profiles draw is told apart
    assert palette.n_colour(1000) == palette.n_colour(1000) not in fixed  # an N of one's own: a fixed shade too


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: palette.arm("GRPO"), "arm='GRPO' has no colour: known arms are ProRL, BroRL"),
        (lambda: palette.n_colour(0), "n=0 has no colour"),
        (lambda: palette.tint("#000000", 1.0), "amount=1.0 is not allowed"),
    ],
)
def test_the_palette_refuses_what_it_cannot_colour(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_tint_lightens_towards_white():
    assert palette.tint("#000000", 0.5) == "#808080" and palette.tint(palette.BLUE, 0.0) == palette.BLUE


# --- classes ---
def test_a_reported_artifact_from_elsewhere_names_its_source_and_no_other_class_takes_one():
    check_artifact("blog", "reported", basis="the authors' blog")
    assert class_text("reported", None, "the authors' blog") == (
        "reported: numbers copied from the authors' blog, not from the paper"
    )
    assert stamp_text("reported", None, "the authors' blog") == "reported, not from the paper"
    assert class_text("reported") == PROVENANCE["reported"]
    with pytest.raises(ValueError, match="basis='x' is for provenance='estimate'"):
        check_artifact("a", "reproduced", basis="x")


def test_a_quick_profile_run_is_never_stamped_reproduced():
    from brorl_lib.core import variants
    from brorl_lib.core.profiles import load_profile
    from brorl_lib.simulator import report as sr

    quick = sr.SimulatorConfig()  # the defaults are the quick profile
    assert variants.classify("reproduced", quick) == ("scaled-down", None)
    paper = sr.SimulatorConfig(**load_profile("paper")["02_simulator"]["parameters"])
    assert variants.at_paper_scale(paper) and variants.classify("reproduced", paper) == ("reproduced", None)
