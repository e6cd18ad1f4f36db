"""The paper's real recipe on verl 0.9.1: training data, the reward function, the ProRL and BroRL
configs, Ray launch scripts, and verl's logs back into the paper's figures and tables.

Modules: ``tasks`` (which Reasoning Gym tasks), ``codec`` (entries as JSON), ``data`` (parquet rows),
``rewards`` (verl's custom reward function), ``configs`` (Hydra compose of both arms), ``launch``
(scripts, preflight, execution), ``logs`` (file-logger JSONL to DataFrames), ``report`` (the
notebook's parameters, plan and artifacts), ``plots`` (figures), ``record`` (the committed launch
scripts and evaluation commands in recipes/brorl/). Nothing here downloads at import.
"""
