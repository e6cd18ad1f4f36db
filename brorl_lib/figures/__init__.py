"""How every figure looks and is saved: ``styles`` (presets and ``.mplstyle`` files), ``palette`` (one colour per arm
and per N), ``plotting`` (figures in the style in force, laid out by matplotlib; ``save_figure``). Imports ``core/``
only; the layout check of every figure in every preset is the tests' (tests/layout_check.py)."""
