"""The paper's real recipe on verl 0.9.1: training data, the reward function, the ProRL and BroRL
configs, Ray launch scripts, and verl's logs back into the paper's figures and tables.

Modules: ``tasks`` (which Reasoning Gym tasks), ``codec`` (entries as JSON), ``data`` (parquet rows),
``domains`` (code, STEM and instruction-following rows from local files), ``rewards`` (verl's custom
reward function), ``configs`` (Hydra compose of both arms), ``launch`` (scripts and running them),
``preflight`` (the head node's checks before a launch), ``smoke`` (the one-node smoke profile),
``tokenizer_fallback`` (verl's continuous-token builder for DeepSeek-R1-distilled Qwen models) and
``guard`` (dynamic sampling's round cap as verl's custom sampler), both loaded by verl itself,
``logs`` (file-logger JSONL to DataFrames), ``report`` (the notebook's parameters, plan and artifacts),
``plots`` (figures), ``record`` (the committed launch scripts and evaluation commands in recipes/brorl/),
``cpu`` (verl's trainer on a CPU, a test harness). Nothing here downloads at import.
"""
