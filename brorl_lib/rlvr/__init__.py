"""Laptop-scale RLVR: a tiny causal LM, verifiable tasks, and the paper's algorithm pieces from verl."""
