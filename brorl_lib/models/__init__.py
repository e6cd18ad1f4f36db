"""The one tiny model, shared by notebook 04's laptop experiment (``rlvr``), the verl CPU run
(``verl_recipe.cpu``) and the tests: a Qwen2-architecture causal LM of a given shape (``tiny``), the parameter
count of any Qwen2 config, the paper's 1.5B model included (``qwen2``), and the two tokenizers: notebook 04's
character vocabulary (``char_tokenizer``) and the CPU run's byte-level tokenizer of DeepSeek-R1-Distill's
family (``deepseek_tokenizer``), each tested against the files its committed runs carry. Imports core/ only."""
