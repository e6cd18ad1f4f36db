"""The notebooks' Explore sections: ``controls`` (ipywidgets from parameter declarations), ``live`` (a figure
redrawn by its controls, Run/Stop with progress), ``views`` (``save_view``: save what you see, never into
``figures/``). Imports ``core/`` and ``figures`` only."""
