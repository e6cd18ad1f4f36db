"""How every figure looks and is saved: ``styles`` (presets and ``.mplstyle`` files), ``palette`` (one colour per arm
and per N), ``plotting`` (figures in the style in force, re-flowed to its width; ``save_figure``), ``layout`` (the
layout check of every figure in every preset, and the moves that mend it). Imports ``core/`` only."""
