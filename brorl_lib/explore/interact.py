"""An explorer: ipywidgets' own ``interactive`` (what ``interact`` and ``interact_manual`` build) over a draw function.

``Explorer(draw, controls, ...)`` reads the controls (``explore.controls``) into parameters, draws a figure
(or a figure and HTML shown below it) and shows it in the widget's output. A cheap explorer redraws when a
control moves (``interact``); a costly one (``manual=True``) waits for its Draw button (``interact_manual``),
shows tqdm's progress bar, and stops with the kernel's interrupt (■), keeping the figure drawn last. A value
the checks refuse prints their ``ValueError`` above the figure drawn last. ``save`` writes the figure on
screen (``explore.views.save_view``), in another style on request.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping

import ipywidgets as w
import matplotlib.pyplot as plt
from IPython.display import HTML, display

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.explore.controls import STATIC_MESSAGE, interactive_session
from brorl_lib.explore.views import DEFAULT_VIEWS_DIR, save_view
from brorl_lib.figures import styles
from brorl_lib.figures.plotting import style_of

Draw = Callable[[dict], "plt.Figure | tuple[plt.Figure, str]"]  # a figure, or a figure and HTML below it


class Explorer:
    """Controls, the figure they drive, and ``save``. ``widget`` (an ``ipywidgets.interactive``) is what a
    notebook shows.

    ``read`` turns the controls' values into the parameters ``draw`` takes (and raises the checks' ValueError;
    default: the values as they are); ``provenance`` is a class or a function of those parameters (``basis``
    says what an ``estimate`` rests on); ``title`` heads the controls."""

    def __init__(
        self,
        draw: Draw,
        controls: Mapping[str, w.ValueWidget],
        *,
        read: Callable[[dict], dict] | None = None,
        name: str,
        provenance: str | Callable[[dict], str],
        caption: str = "",
        basis: str = "",
        manual: bool = False,
        title: str = "",
    ) -> None:
        self.draw, self.read = draw, read or dict
        self.name, self.caption, self.basis, self._provenance = name, caption, basis, provenance
        self.figure: plt.Figure | None = None
        self.parameters: dict | None = None
        self.note, self.said = "", ""
        for c in controls.values():
            if hasattr(c, "style") and hasattr(c.style, "description_width"):
                c.style.description_width = "initial"  # whole names, never cut
        self.controls = dict(controls)
        self.widget = w.interactive(self.show, {"manual": manual, "manual_name": "Draw"}, **self.controls)
        self.widget.add_class("brorl-explore")
        if title:
            self.widget.children = (w.HTML(f"<b>{html.escape(title)}</b>"), *self.widget.children)
        if manual:
            self.widget.update()  # the starting settings, drawn once

    def provenance(self, params: dict) -> str:
        return self._provenance(params) if callable(self._provenance) else self._provenance

    def show(self, **values) -> None:
        """Draw ``values`` and show the figure; a refused value or an interrupt shows the figure drawn last."""
        try:
            params = self.read(values)
            drawn = self.draw(params)
        except ValueError as err:
            self.said = f"ValueError: {err}"
        except KeyboardInterrupt:
            self.said = "stopped: the figure drawn last is kept"
        else:
            fig, self.note = drawn if isinstance(drawn, tuple) else (drawn, "")
            plt.close(fig)  # shown below, out of pyplot's list so it is not shown twice
            self.figure, self.parameters, self.said = fig, params, ""
        if self.said:
            print(self.said)
        if self.figure is not None:
            display(self.figure)
            if self.note:
                display(HTML(self.note))

    def saved_parameters(self) -> dict:
        """The parameters of the figure on screen: the whole notebook config it was drawn with, then the rest."""
        params = dict(self.parameters or {})
        config = params.pop("_config", None)
        whole = config.as_dict() if hasattr(config, "as_dict") else {}
        return {**whole, **{k: v for k, v in params.items() if not k.startswith("_")}}

    def save(self, folder=DEFAULT_VIEWS_DIR, style: str | None = None, svg: bool = False) -> list:
        """Write the figure on screen into ``folder`` (relative: from the repository; never figures/) with its
        provenance and parameters; in ``style`` (a preset or a ``.mplstyle`` path), re-drawn in it first when it is
        not the style on screen. Returns the files written."""
        if self.figure is None:
            raise ValueError("nothing drawn yet: move a control or press Draw first")
        chosen = styles.resolve(style, "style", base=REPO_ROOT) if style else style_of(self.figure)
        formats = styles.check_formats(["svg"] if svg else [], "svg")
        fig = self.figure
        if chosen.label != style_of(fig).label:
            with styles.using(chosen):
                drawn = self.draw(self.parameters)
            fig = drawn[0] if isinstance(drawn, tuple) else drawn
            plt.close(fig)
        return save_view(
            fig,
            folder,
            provenance=self.provenance(self.parameters),
            parameters=self.saved_parameters(),
            name=self.name,
            caption=self.caption,
            basis=self.basis,
            config=self.parameters.get("_config"),
            formats=formats,
        )


class Explorers(dict):
    """A notebook's explorers by tab title; shown as one tab each."""

    def _ipython_display_(self) -> None:
        tabs = w.Tab([e.widget for e in self.values()])
        for i, title in enumerate(self):
            tabs.set_title(i, title)
        display(tabs)


def explore(build: Callable[[], Explorers]) -> Explorers | None:
    """An explore cell: ``build()`` shown (and returned, for ``save``) in a live session, else the static line."""
    if not interactive_session():
        print(STATIC_MESSAGE)
        return None
    built = build()
    display(built)
    return built
