"""Verifiable tasks, shared by the laptop reward (``rlvr``), the verl reward function (``verl_recipe.rewards``)
and the evaluation (``evaluation.scoring``): one implementation of each step, so training reward and
evaluation score cannot drift apart.

Modules, one concern each (nothing heavy is imported until used):

* ``generation``    Reasoning Gym entries under fixed seeds, always with Python hash seed 0
* ``answers``       what part of a response is the answer: after ``</think>``, ``<answer>`` tags, code blocks
* ``verifiers``     Reasoning Gym's own verifiers: the raw answer score and the tagged-response score
* ``math_scoring``  math answers: verl's MATH scorer, then math-verify
* ``instruction_scoring``  instruction following: Google's IFEval checkers, the share of instructions followed
* ``credit``        full credit and the binary pass rule
"""
