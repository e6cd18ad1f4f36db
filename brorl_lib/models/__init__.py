"""The one tiny model, shared by notebook 04's laptop experiment (``rlvr``), the verl CPU run
(``verl_recipe.cpu``) and the tests: a Qwen2-architecture causal LM of a given shape (``tiny``), and the
parameter count of any Qwen2 config, the paper's 1.5B model included (``qwen2``). Imports core/ only."""
