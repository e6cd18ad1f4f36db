"""A figure that redraws in place when its controls move, and long runs behind Run and Stop buttons.

``LiveFigure`` joins controls (``explore.controls``) and a ``draw(values, progress)`` function that returns a
matplotlib figure. Quick settings redraw on every change; settings ``live`` calls too large wait for the
Run button, then run in a thread with a progress bar and a Stop button. A ``ValueError`` (a check refusing
a value) shows its message under the controls and leaves the previous figure in place; any other error
shows its traceback there too, then goes to the kernel's log. The Save row writes the current figure with
``explore.views.save_view``, in the style chosen beside it (a preset of ``figures.styles`` or the path of a
``.mplstyle`` file, relative to the repository): a style other than the one on screen re-draws the figure
in it first (in a thread, with progress, when the settings are not live), and SVG on request.
"""

from __future__ import annotations

import html
import io
import threading
import traceback
from collections.abc import Callable, Mapping

import ipywidgets as w
import matplotlib.pyplot as plt

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.explore.controls import STATIC_MESSAGE, interactive_session
from brorl_lib.explore.views import DEFAULT_VIEWS_DIR, save_view, views_folder
from brorl_lib.figures import styles
from brorl_lib.figures.plotting import style_of

ERROR_COLOUR = "#b00020"


class Stopped(Exception):
    """Raised inside a run when its Stop button was pressed."""


class Progress:
    """Handed to ``draw``: ``start(total)``, then ``advance(k)`` per unit of work; raises ``Stopped`` on Stop."""

    def __init__(self, bar: w.IntProgress | None = None, stop: threading.Event | None = None) -> None:
        self.bar, self.stop = bar, stop or threading.Event()
        self.done = 0

    def start(self, total: int, what: str = "") -> None:
        self.done = 0
        if self.bar is not None:
            self.bar.max, self.bar.value = max(int(total), 1), 0
            self.bar.description = what
        self.check()

    def advance(self, k: int = 1) -> None:
        self.done += k
        if self.bar is not None:
            self.bar.value = min(self.done, self.bar.max)
        self.check()

    def check(self) -> None:
        if self.stop.is_set():
            raise Stopped(f"stopped after {self.done} of {self.bar.max if self.bar else '?'}")


Draw = Callable[[dict, Progress], "plt.Figure | tuple[plt.Figure, str]"]  # a figure, or a figure and HTML below it


def png_bytes(fig: plt.Figure) -> bytes:
    """The figure as PNG at screen resolution (what the reader sees; ``save_view`` writes the print version)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    return buf.getvalue()


class LiveFigure:
    """Controls, the figure they drive, a message line, and a Save row. ``widget`` is what a notebook shows.

    ``read`` turns the controls' values into the parameters ``draw`` takes (and raises the checks' ValueError);
    ``provenance`` is a class or a function of those parameters (``basis`` says what an ``estimate`` rests on);
    ``live(params)`` says whether a change may redraw at once (else the Run button runs it in a thread, with
    progress and Stop)."""

    def __init__(
        self,
        controls: Mapping[str, w.Widget],
        read: Callable[[dict], dict],
        draw: Draw,
        *,
        name: str,
        provenance: str | Callable[[dict], str],
        caption: str = "",
        live: Callable[[dict], bool] | None = None,
        title: str = "",
        basis: str = "",
    ) -> None:
        self.controls, self.read, self.draw = dict(controls), read, draw
        self.name, self.caption, self._provenance, self.live = name, caption, provenance, live
        self.basis = basis
        self.figure: plt.Figure | None = None
        self.parameters: dict | None = None
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()
        self.image = w.Image(format="png", layout=w.Layout(max_width="100%", align_self="flex-start"))
        self.image.add_class("brorl-live-image")
        self.message = w.HTML()
        self.note = w.HTML()  # what ``draw`` returns beside the figure (e.g. a table), below it
        self.note.add_class("brorl-live-note")
        self.message.add_class("brorl-live-message")
        self.bar = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(visibility="hidden"))
        self.run_button = w.Button(description="Run", icon="play", button_style="primary")
        self.stop_button = w.Button(description="Stop", icon="stop", disabled=True)
        self.run_button.on_click(lambda _: self.start())
        self.stop_button.on_click(lambda _: self.stop.set())
        self.folder = w.Text(value=str(DEFAULT_VIEWS_DIR.relative_to(REPO_ROOT)), description="save into")
        self.style = w.Combobox(
            value=styles.DEFAULT,
            options=list(styles.PRESETS),
            description="style",
            ensure_option=False,
            tooltip="a preset ("
            + "; ".join(f"{k}: {v.description}" for k, v in styles.PRESETS.items())
            + ") or the path of a .mplstyle file, relative to the repository",
        )
        self.svg = w.Checkbox(value=False, description="SVG too", indent=False)
        self.save_button = w.Button(description="Save figure", icon="save")
        self.save_button.on_click(lambda _: self.save())
        if live is None:  # every setting redraws at once: no Run row
            for b in (self.run_button, self.stop_button):
                b.layout.display = "none"
        for c in self.controls.values():
            if hasattr(c, "style") and hasattr(c.style, "description_width"):
                c.style.description_width = "initial"  # whole names, never cut
            c.observe(lambda _: self.changed(), names="value")
        rows = [w.HTML(f"<b>{html.escape(title)}</b>")] if title else []
        self.widget = w.VBox(
            [
                *rows,
                w.Box(list(self.controls.values()), layout=w.Layout(flex_flow="row wrap")),
                w.HBox([self.run_button, self.stop_button, self.bar]),
                self.message,
                self.image,
                self.note,
                w.Box([self.folder, self.style, self.svg, self.save_button], layout=w.Layout(flex_flow="row wrap")),
            ]
        )
        self.widget.add_class("brorl-live")

    # --- reading and drawing ---
    def values(self) -> dict:
        return {k: c.value for k, c in self.controls.items()}

    def provenance(self, params: dict) -> str:
        return self._provenance(params) if callable(self._provenance) else self._provenance

    def _say(self, text: str, error: bool = False) -> None:
        colour = ERROR_COLOUR if error else "#444"
        self.message.value = f'<pre style="color:{colour};white-space:pre-wrap;margin:0">{html.escape(text)}</pre>'

    def _params(self) -> dict | None:
        try:
            return self.read(self.values())
        except ValueError as err:
            self._say(f"ValueError: {err}", error=True)
            return None

    def _show(self, drawn, params: dict) -> None:
        fig, note = drawn if isinstance(drawn, tuple) else (drawn, "")
        self.image.value = png_bytes(fig)
        self.note.value = note
        plt.close(fig)  # kept for saving, out of pyplot's list so the notebook does not draw it again
        self.figure, self.parameters = fig, params

    def _draw(self, params: dict, progress: Progress) -> bool:
        """Draw and show; a refused value or a Stop leaves the previous figure. True when drawn."""
        try:
            fig = self.draw(params, progress)
        except ValueError as err:
            self._say(f"ValueError: {err}", error=True)
            return False
        except Stopped as err:
            self._say(f"{err}: the previous figure is kept")
            return False
        except Exception:  # shown where the reader looks, then re-raised for the kernel's log
            self._say(traceback.format_exc(), error=True)
            raise
        self._show(fig, params)
        return True

    def changed(self) -> None:
        """A control moved: redraw now if the settings are live, else ask for Run."""
        if self.thread is not None and self.thread.is_alive():
            self._say("a run is going: press Stop first")
            return
        params = self._params()
        if params is None:
            return
        if self.live is not None and not self.live(params):
            self._say("these settings take longer: press Run (Stop ends the run; the figure updates when it is done)")
            return
        self._say("drawing…")
        if self._draw(params, Progress()):
            self._say("")

    def start(self) -> None:
        """Run the current settings in a thread, with the progress bar and the Stop button."""
        if self.thread is not None and self.thread.is_alive():
            return
        params = self._params()
        if params is None:
            return

        def job(progress: Progress) -> None:
            if self._draw(params, progress):
                self._say("done")

        self._say("running…")
        self._start_thread(job)

    def _start_thread(self, job: Callable[[Progress], object]) -> None:
        """``job(progress)`` in a thread, with the progress bar and the Stop button; a Stop or a refused value
        says so under the controls."""
        self.stop.clear()
        self.bar.layout.visibility = "visible"
        self.run_button.disabled, self.stop_button.disabled = True, False

        def work() -> None:
            try:
                job(Progress(self.bar, self.stop))
            except Stopped as err:
                self._say(f"{err}: nothing saved")
            except ValueError as err:
                self._say(f"ValueError: {err}", error=True)
            finally:
                self.run_button.disabled, self.stop_button.disabled = False, True

        self.thread = threading.Thread(target=work, name=f"{self.name} run", daemon=True)
        self.thread.start()

    def saved_parameters(self) -> dict:
        """The parameters of the figure on screen: the whole notebook config it was drawn with, then the rest."""
        params = dict(self.parameters or {})
        config = params.pop("_config", None)
        whole = config.as_dict() if hasattr(config, "as_dict") else {}
        return {**whole, **{k: v for k, v in params.items() if not k.startswith("_")}}

    def save(self) -> list:
        """Save the figure on screen into the folder typed beside the button (never figures/), in the style
        chosen there: re-drawn in it first when it is not the style on screen."""
        if self.figure is None:
            self._say("nothing drawn yet", error=True)
            return []
        if self.thread is not None and self.thread.is_alive():
            self._say("a run is going: press Stop first")
            return []
        try:  # every choice checked before any drawing
            style = styles.resolve(self.style.value, "style", base=REPO_ROOT)
            formats = styles.check_formats(["svg"] if self.svg.value else [], "formats")
            views_folder(self.folder.value)
        except ValueError as err:
            self._say(f"ValueError: {err}", error=True)
            return []
        if style.label == style_of(self.figure).label:
            return self._write(self.figure, formats)
        params = self.parameters
        if self.live is not None and not self.live(params):
            self._say(f"re-drawing in style {style.label} to save it (Stop ends it)…")
            self._start_thread(lambda progress: self._write(self._redrawn(params, style, progress), formats))
            return []
        return self._write(self._redrawn(params, style, Progress()), formats)

    def _redrawn(self, params: dict, style: styles.FigureStyle, progress: Progress) -> plt.Figure:
        """The figure of ``params`` drawn again in ``style`` (kept off screen)."""
        with styles.using(style):
            drawn = self.draw(params, progress)
        fig = drawn[0] if isinstance(drawn, tuple) else drawn
        plt.close(fig)
        return fig

    def _write(self, fig: plt.Figure, formats: tuple[str, ...]) -> list:
        config = (self.parameters or {}).get("_config")
        try:
            files = save_view(
                fig,
                self.folder.value,
                provenance=self.provenance(self.parameters),
                parameters=self.saved_parameters(),
                name=self.name,
                caption=self.caption,
                basis=self.basis,
                config=config,
                formats=formats,
            )
        except ValueError as err:
            self._say(f"ValueError: {err}", error=True)
            return []
        self._say("saved " + ", ".join(str(f) for f in files))
        return files

    def show_first(self) -> LiveFigure:
        """Draw the starting settings at once (runs them even when they are not live)."""
        params = self._params()
        if params is not None:
            self._draw(params, Progress())
        return self


def explore(build: Callable[[], object]):
    """What an explore cell shows: ``build()`` (the controls) in a live session, else the fixed static line."""
    if not interactive_session():
        print(STATIC_MESSAGE)
        return None
    return build()
