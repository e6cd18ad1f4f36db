"""What the paper states, shared by every part: its reported numbers (``reported``), its stated settings and
rules (``setup``) and its theorem (``theorem``: Theorem 1, Lemma 2, Corollary 3). Imports core/ only."""
