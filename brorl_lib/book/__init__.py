"""The book (``make book``): a static HTML site of the committed notebooks, the docs/ pages and a gallery of
figures/ (``build``; the notebook pages: ``pages``, ``tables``; the gallery: ``gallery``; results at a glance:
``glance``). No notebook imports it."""
