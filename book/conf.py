"""Sphinx configuration of the book (make book); brorl_lib.book.build stages its sources and runs Sphinx."""

project = "BroRL companion"
author = "the BroRL companion's authors"
copyright = "the BroRL companion's authors, Apache-2.0"

extensions = ["myst_nb", "sphinx-mathjax-offline"]  # MathJax is copied into the site: formulas render offline
root_doc = "index"  # the README
exclude_patterns = ["figures/**"]  # the artifact files the gallery shows and links: not pages

# The committed, executed notebooks are shown as they are: never executed here.
nb_execution_mode = "off"
nb_merge_streams = True
myst_heading_anchors = 6  # links to headings (page.md#a-heading) resolve as they do on a forge

html_theme = "sphinx_book_theme"
html_title = "BroRL companion"
html_theme_options = {"show_toc_level": 2, "home_page_in_toc": True}
html_static_path = ["_static"]
html_css_files = ["book.css"]  # the gallery's grid of cards; wide output tables scroll inside their box
