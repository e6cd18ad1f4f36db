"""A notebook's row of the results at a glance: the paper's claim it tests, its verdict, the caveat the verdict holds
under and the artifact that shows it, saved as a table (``NAME_claim``) the book and the README read as it is."""

from __future__ import annotations

from typing import TypedDict

import pandas as pd

from brorl_lib.core.artifacts import Saved
from brorl_lib.core.table_files import save_table

SUFFIX = "_claim"  # the artifact names of claim rows end with it
COLUMNS = ("claim", "verdict", "caveat", "figure")


class Claim(TypedDict):
    claim: str  # the paper's claim, in words
    verdict: str  # what the notebook's numbers say of it
    caveat: str  # the conditions the verdict holds under
    figure: str  # the artifact the row links to


def save_claim(
    name: str, row: Claim, *, provenance: str, basis: str = "", beyond: dict[str, str] | None = None
) -> Saved:
    """Save ``row`` as the one-row table ``name`` (ending in ``_claim``), of the class of the numbers it reads
    (``beyond``: the settings those numbers change from the paper's, which make it a variant; ``save_table``)."""
    if not name.endswith(SUFFIX) or set(row) != set(COLUMNS):
        raise ValueError(f"a claim row is a table named '..{SUFFIX}' with the keys {', '.join(COLUMNS)}: got {name!r}")
    caption = "The paper's claim this notebook tests, our verdict and its caveat (the results at a glance)"
    return save_table(
        pd.DataFrame([row], columns=list(COLUMNS)),
        name,
        provenance=provenance,
        caption=caption,
        basis=basis,
        beyond=beyond,
    )
