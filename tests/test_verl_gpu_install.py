"""The GPU install: the gpu extra resolves from the package index with no source build that needs torch, the
flash-attn wheel matches the torch it resolves to, and the docs show exactly the commands resolved here.

The resolution needs the package index (about a minute each, with the tests' Python and with Python 3.12); without it,
or without a Python 3.12, the test is skipped, saying so."""

import contextlib
import hashlib
import io
import sys
import tarfile
import urllib.request
import zipfile

import pytest

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.verl_recipe import gpu_install as gi

DOCS = ("docs/gpu-and-clusters.md", "recipes/brorl/README.md")
INDEX = "https://pypi.org/simple/pip/"


def _index_reachable() -> str:
    try:
        urllib.request.urlopen(INDEX, timeout=20).close()
    except OSError as err:
        return f"{INDEX} unreachable ({err}): the gpu install's resolution is NOT checked offline"
    return ""


@pytest.fixture(scope="module", params=["tests' Python", gi.PYTHON])
def report(request, tmp_path_factory):
    """pip's report of the gpu extra, resolved with the Python running the tests and with Python 3.12 (the one the
    docs install with); skipped, saying why, without the index or without that Python."""
    why = _index_reachable()
    if why:
        pytest.skip(reason=why)
    python = sys.executable
    if request.param == gi.PYTHON:
        found, where = gi.find_python(gi.PYTHON)
        if found is None:
            pytest.skip(reason=f"{where}: the gpu install's resolution is NOT checked with Python {gi.PYTHON}")
        python = gi.venv_with_pip(found, tmp_path_factory.mktemp("venv"))  # this pip, not that Python's own
    return gi.resolve(gi.GPU_EXTRA, tmp_path_factory.mktemp("pip") / "report.json", python=python)


@pytest.mark.parametrize("doc", DOCS)
def test_docs_show_the_commands_the_resolution_uses(doc):
    text = (REPO_ROOT / doc).read_text()
    missing = [c for c in (*gi.COMMANDS, gi.SOURCE_BUILD) if c not in text]
    assert not missing, f"{doc} lacks these install commands of gpu_install.py: {missing}"
    rest = text.replace(gi.SOURCE_BUILD, "").replace(gi.COMMANDS[2], "")
    assert "flash-attn==2.8.3" not in rest, f"{doc} installs flash-attn from PyPI"
    assert gi.FLASH_ATTN_FALLBACK not in text, f"{doc} installs the fallback wheel without its SHA-256"


@pytest.mark.slow
def test_gpu_extra_resolves_with_no_source_build_that_needs_torch(report):
    builds = gi.source_builds(report)
    needs = gi.torch_at_build(builds)
    assert not needs, f"source builds that need torch: {needs}"
    names = {i.name.lower().replace("_", "-") for i in gi.items(report)}
    assert {"vllm", "verl", "torch"} <= names and "flash-attn" not in names
    print(
        f"resolved with Python {report['environment']['python_version']}: {len(names)} distributions;",
        "source builds:",
        ", ".join(f"{i.name}=={i.version}" for i in builds) or "none",
        file=sys.stderr,
    )


def test_flash_attn_wheels_match_the_resolved_torch_and_verls_pin_and_ray_is_preflights(report):
    found = {i.name.lower(): i for i in gi.items(report)}
    torch_v = found["torch"].version.split("+")[0]
    cuda = found["nvidia-cuda-runtime"].version  # torch 2.11's CUDA runtime wheel
    tags = gi.wheel_tags(gi.FLASH_ATTN_FALLBACK)
    major_minor = ".".join(torch_v.split(".")[:2])
    cu = "cu" + "".join(cuda.split(".")[:2])
    assert tags["version"] == f"{gi.FLASH_ATTN_VERSION}+{cu}torch{major_minor}", (tags, torch_v, cuda)
    assert tags["py"] == tags["abi"] == "cp" + gi.PYTHON.replace(".", "") and tags["platform"] == "linux_x86_64"
    assert (cu, major_minor) == ("cu130", "2.11")  # what verl's wheelhouse builds for (FLASH_ATTN_SOURCE)
    verl = next(i for i in report["install"] if i["metadata"]["name"] == "verl")
    pins = [r for r in verl["metadata"]["requires_dist"] if r.startswith("flash-attn") and "cu130torch211" in r]
    assert pins and pins[0].startswith(f"flash-attn=={gi.FLASH_ATTN_VERSION}"), pins
    assert f"flash-attn=={gi.FLASH_ATTN_VERSION}" in gi.COMMANDS[2] and "--no-deps" in gi.COMMANDS[2]
    assert "einops" in found  # flash-attn's other requirement, which --no-deps leaves to the gpu extra
    from brorl_lib.verl_recipe import preflight

    demanded = preflight.pins()
    for dist in ("ray", "transferqueue"):
        assert found[dist].version == demanded[dist], (dist, found[dist].version, demanded[dist])


def test_the_fallback_wheel_is_installed_only_by_its_sha256(tmp_path):
    with pytest.raises(ValueError, match="will not be installed unhashed"):
        gi.fallback_command("")
    with pytest.raises(ValueError, match="sha256='abc' is not allowed"):
        gi.fallback_command("abc")
    cmd = gi.fallback_command("a" * 64)
    assert cmd[-1] == f"{gi.FLASH_ATTN_FALLBACK}#sha256={'a' * 64}" and cmd[:3] == ["pip", "install", "--no-deps"]
    if not gi.FLASH_ATTN_FALLBACK_SHA256:  # nothing recorded: the command refuses, saying why
        assert gi.main(["fallback"]) == 2
    # pip checks a URL's #sha256: a local wheel with a wrong one is refused
    wheel = tmp_path / "demo_pkg-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("demo_pkg/__init__.py", "")
        z.writestr("demo_pkg-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 0.1\n")
        z.writestr("demo_pkg-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("demo_pkg-0.1.dist-info/RECORD", "")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    for sha, ok in ((digest, True), ("0" * 64, False)):
        with pytest.raises(gi.ResolutionFailed, match="Expected sha256") if not ok else contextlib.nullcontext():
            gi.resolve(["pip", "install", "--no-deps", f"{wheel.as_uri()}#sha256={sha}"], tmp_path / "r.json")


def _sdist(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"pkg-1.0/{name}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_source_build_needing_torch_is_named():
    flash_like = _sdist({"setup.py": "import os\nimport torch\nfrom torch.utils.cpp_extension import CUDAExtension\n"})
    assert gi.build_needs_torch(flash_like, "flash_attn-2.8.3.tar.gz") == ["setup.py imports torch"]
    declared = _sdist({"pyproject.toml": '[build-system]\nrequires = ["setuptools", "torch>=2.4"]\n'})
    assert gi.build_needs_torch(declared, "x.tar.gz") == ["pyproject.toml build-system.requires: torch>=2.4"]
    plain = _sdist({"setup.py": "from setuptools import setup\nsetup(name='torchless')\n"})
    assert gi.build_needs_torch(plain, "x.tar.gz") == []


def test_flash_attn_from_pypi_does_not_resolve_without_torch(tmp_path):
    if why := _index_reachable():
        pytest.skip(reason=why)
    with pytest.raises(gi.ResolutionFailed, match="torch"):
        gi.resolve(["pip", "install", "--no-deps", "flash-attn==2.8.3"], tmp_path / "r.json")


def test_driver_versions_compare_by_number():
    assert gi.driver_ok("580.65.06") and gi.driver_ok("590.1") and not gi.driver_ok("575.57.08")
    assert not gi.driver_ok("58.0") and gi.driver_ok("1000")
    with pytest.raises(ValueError, match="driver version"):
        gi.parse_driver("N/A")
    with pytest.raises(ValueError, match="not a wheel"):
        gi.wheel_tags("https://example.org/flash_attn-2.8.3.tar.gz")


def _node(**kw) -> gi.NodeGpus:
    base = dict(count=8, torch_version="2.11.0+cu130", torch_cuda="13.0", driver="580.65.06", driver_note="nvidia-smi")
    return gi.NodeGpus(**{**base, "visible": None, **kw})


def test_preflight_reports_the_driver_and_says_why_no_gpu_is_seen():
    from brorl_lib.verl_recipe import preflight

    ok = preflight.check_gpu(8, node=_node())
    assert ok.ok and "NVIDIA driver 580.65.06" in ok.detail and ">= 580.65.06" in ok.detail
    cases = {
        "is a CPU build": _node(count=0, torch_version="2.13.0+cpu", torch_cuda=None),
        "no NVIDIA driver found (no module)": _node(count=0, driver=None, driver_note="no module"),
        "NVIDIA driver 570.86.15 is older than 580.65.06": _node(count=0, driver="570.86.15"),
        "CUDA_VISIBLE_DEVICES='0,1' hides GPUs": _node(count=2, visible="0,1"),
    }
    for why, node in cases.items():
        r = preflight.check_gpu(8, node=node)
        assert not r.ok and why in r.detail.partition("; why: ")[2], (why, r.detail)
    old = preflight.check_gpu(8, node=_node(driver="575.57.08"))  # GPUs seen, driver still below the minimum
    assert not old.ok and "update the NVIDIA driver" in old.fix


def test_driver_version_is_read_from_the_kernel_module_without_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    proc = tmp_path / "version"
    proc.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder)\n"
    )
    assert gi.nvidia_driver(proc) == ("580.65.06", str(proc))
    driver, why = gi.nvidia_driver(tmp_path / "absent")
    assert driver is None and "no NVIDIA kernel driver is loaded" in why
