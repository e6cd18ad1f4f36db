"""What the paper states, shared by every part: its reported numbers (``reported``), its stated settings and
rules (``setup``), its theorem (``theorem``: Theorem 1, Lemma 2, Corollary 3), its evaluation protocol
(``protocol``) and its arms (``arms``). Imports core/ only."""
