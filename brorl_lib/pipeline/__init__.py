"""The pipeline around the notebooks: run them with papermill (``runner``, ``execute``), skip unchanged ones by
their input hashes (``hashing``), record their artifacts (``manifest``, ``run_log``), strip per-run noise from
executed notebooks (``notebook_noise``), gate the screenshots (``screenshots``), and the command line (``cli``).
No notebook imports it; it imports ``core/`` and ``figures``, and names each notebook's config by string
(``core.registry``)."""
