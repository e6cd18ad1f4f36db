"""brorl_lib: the shared library behind the BroRL companion notebooks.

Every computation lives here; the notebooks in ``notebooks/`` only call it and display.
"""

__version__ = "0.1.0"
