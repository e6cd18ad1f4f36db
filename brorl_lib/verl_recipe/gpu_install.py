"""The GPU install of the recipe, in one place: the commands the docs show, and their resolution without installing.

On a GPU node the install is three commands (``COMMANDS``): a Python 3.12 virtual environment, the ``gpu`` extra
(vLLM 0.24.0 and verl 0.9.1 with its vLLM extra, which bring torch 2.11.0 built for CUDA 13.0, and the Ray and
TransferQueue versions preflight demands) from the package index, then flash-attn 2.8.3 from verl's own
wheelhouse (``FLASH_ATTN_INDEX``, ``FLASH_ATTN_SOURCE``), ``--no-deps`` so that nothing else comes from there.
flash-attn is not in the extra: on PyPI 2.8.3 is only a source distribution whose ``setup.py`` imports torch, so
pip's isolated build fails before it installs anything. The wheelhouse builds for cu130 / torch 2.11 / CPython
3.12, hence Python 3.12.

If the wheelhouse has no wheel that imports against this torch, the fallback is a third-party wheel
(``FLASH_ATTN_FALLBACK``), installed only with its SHA-256 in the URL (``#sha256=``, which pip checks):
``fallback_command`` refuses without one. No SHA-256 of it was found in a public source, so none is recorded
(``FLASH_ATTN_FALLBACK_SHA256``); ``python -m brorl_lib.verl_recipe.gpu_install fallback --sha256 HEX`` takes the one
you checked.

``resolve`` runs the extra's command as ``pip install --dry-run --ignore-installed --report`` (the package index
only, nothing installed) and ``source_builds`` lists what it would build from a source distribution;
``torch_at_build`` opens each such archive and names those whose build needs torch. tests/test_verl_gpu_install.py
runs them, and checks that docs/gpu-and-clusters.md and recipes/brorl/README.md show ``COMMANDS`` verbatim.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tomllib
import urllib.request
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from brorl_lib.core.paths import REPO_ROOT

PYTHON = "3.12"  # the flash-attn wheel's CPython (cp312); verl's cu130 extras are built for 3.12 only
VENV = ".venv-gpu"  # our choice of folder name
FLASH_ATTN_VERSION = "2.8.3"  # verl 0.9.1's pin (its extra flash-attn-cu130torch211)
FLASH_ATTN_INDEX = "https://verl-project.github.io/verl-wheelhouse/simple/"
FLASH_ATTN_SOURCE = (
    "verl-project/verl at 7bc80c00a (PR #7127, 'uv integration', merged): pyproject.toml routes flash-attn to the "
    "verl-wheelhouse index ([tool.uv.sources], [[tool.uv.index]] url), and docs/start/install.rst, 'Install with "
    "uv', says it comes prebuilt from there, built for cu130 / torch 2.11 / CPython 3.12; its uv.lock takes "
    "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl from the wheelhouse's releases, with no hash"
)
FLASH_ATTN_FALLBACK = (
    "https://github.com/mjun0812/flash-attention-prebuild-wheels/releases/download/v0.9.4/"
    "flash_attn-2.8.3+cu130torch2.11-cp312-cp312-linux_x86_64.whl"
)
FLASH_ATTN_FALLBACK_SHA256 = ""  # not recorded: no public source of it was found; never made up
COMMANDS = (  # what the docs show, verbatim
    f"python{PYTHON} -m venv {VENV} && . {VENV}/bin/activate",
    'pip install -e ".[gpu]"',
    f"pip install --no-deps --index-url {FLASH_ATTN_INDEX} flash-attn=={FLASH_ATTN_VERSION}",
)
FALLBACK = "python -m brorl_lib.verl_recipe.gpu_install fallback --sha256 <SHA-256 you checked>"
GPU_EXTRA = tuple(shlex.split(COMMANDS[1]))  # the one that resolve() checks
# Building flash-attn 2.8.3 from source instead (no prebuilt wheel for the node's CUDA, torch or Python):
SOURCE_BUILD = (
    "pip install ninja packaging && CUDA_HOME=/usr/local/cuda pip install --no-build-isolation flash-attn==2.8.3"
)
_HEX64 = re.compile(r"[0-9a-f]{64}")


def fallback_command(sha256: str = FLASH_ATTN_FALLBACK_SHA256) -> list[str]:
    """pip's command for the fallback wheel, its SHA-256 in the URL; ValueError when none is given or recorded."""
    if not sha256:
        raise ValueError(
            "the fallback flash-attn wheel has no recorded SHA-256 (gpu_install.FLASH_ATTN_FALLBACK_SHA256 is empty: "
            "none was found in a public source) and will not be installed unhashed: download "
            f"{FLASH_ATTN_FALLBACK}, check its SHA-256 against a source you trust, then {FALLBACK}"
        )
    if not _HEX64.fullmatch(sha256):
        raise ValueError(f"sha256={sha256!r} is not allowed: 64 lowercase hex digits")
    return ["pip", "install", "--no-deps", f"{FLASH_ATTN_FALLBACK}#sha256={sha256}"]


SOURCE_BUILD_COST = (
    "CUDA_HOME must point at a CUDA 13.0 toolkit (nvcc); torch must already be installed, hence "
    "--no-build-isolation; a long nvcc build (merged verl's docs give no time), per node unless the built wheel is "
    "shared"
)
MIN_DRIVER = "580.65.06"  # CUDA 13.0 GA's minimum Linux driver (NVIDIA CUDA 13.0 release notes, CUDA Driver)
MIN_DRIVER_SOURCE = "NVIDIA CUDA Toolkit 13.0 release notes, section CUDA Driver (toolkit driver version table)"
RESOLVE_TIMEOUT_S = 900  # our choice: the resolution took about 60 s on a 2-core machine
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<platform>[^-]+)\.whl$")


@dataclass(frozen=True)
class Item:
    """One distribution the resolution would install: name, version, and the archive pip would fetch."""

    name: str
    version: str
    url: str

    @property
    def is_wheel(self) -> bool:
        return self.url.split("#", 1)[0].endswith(".whl")

    @property
    def is_local(self) -> bool:
        return self.url.startswith("file:")


class ResolutionFailed(RuntimeError):
    """pip could not resolve the install (a conflict, or a source distribution that fails to build metadata)."""


def resolve(args: Iterable[str] = GPU_EXTRA, report: Path | None = None, python: str = sys.executable) -> dict:
    """pip's installation report for ``args`` (a ``pip install`` command line) without installing: the index's
    metadata only, every candidate as if nothing were installed. Raises ``ResolutionFailed`` with pip's last
    lines when pip cannot resolve; the report is kept at ``report`` when given."""
    args = list(args)
    if args[:2] != ["pip", "install"]:
        raise ValueError(f"args={args!r} is not allowed: a 'pip install ...' command line")
    out = report or Path(REPO_ROOT / "build" / "gpu-install-report.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(out)]
    done = subprocess.run(
        cmd + args[2:], cwd=REPO_ROOT, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        lines = [s for s in done.stderr.splitlines() if s.strip() and "is ignored" not in s]
        raise ResolutionFailed(f"`{' '.join(args)}` does not resolve:\n" + "\n".join(lines[-40:]))
    return json.loads(out.read_text())


def items(report: dict) -> list[Item]:
    """Every distribution in pip's report."""
    return [Item(i["metadata"]["name"], i["metadata"]["version"], i["download_info"]["url"]) for i in report["install"]]


def source_builds(report: dict) -> list[Item]:
    """What the install would build from a source distribution (the local project itself excepted)."""
    return [i for i in items(report) if not i.is_wheel and not i.is_local]


def build_needs_torch(archive: bytes, name: str) -> list[str]:
    """Where a source archive (.tar.gz or .zip) needs torch to build: its pyproject.toml's build requirements, or
    a setup.py that imports torch. Empty when neither."""
    files: dict[str, str] = {}
    wanted = ("pyproject.toml", "setup.py")
    if name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(archive)) as z:
            for n in z.namelist():
                if n.count("/") == 1 and n.rsplit("/", 1)[1] in wanted:
                    files[n.rsplit("/", 1)[1]] = z.read(n).decode("utf-8", "replace")
    else:
        with tarfile.open(fileobj=io.BytesIO(archive)) as t:
            for m in t.getmembers():
                if m.isfile() and m.name.count("/") == 1 and m.name.rsplit("/", 1)[1] in wanted:
                    files[m.name.rsplit("/", 1)[1]] = t.extractfile(m).read().decode("utf-8", "replace")
    found = []
    if "pyproject.toml" in files:
        requires = tomllib.loads(files["pyproject.toml"]).get("build-system", {}).get("requires", [])
        found += [f"pyproject.toml build-system.requires: {r}" for r in requires if re.match(r"torch\b", r.strip())]
    if re.search(r"^\s*(import torch|from torch[ .])", files.get("setup.py", ""), re.M):
        found.append("setup.py imports torch")
    return found


def torch_at_build(builds: Iterable[Item]) -> dict[str, list[str]]:
    """``build_needs_torch`` of each source distribution, fetched from its URL; {name==version: reasons}, only
    those that need torch."""
    out = {}
    for item in builds:
        url = item.url.split("#", 1)[0]
        with urllib.request.urlopen(url, timeout=120) as r:  # noqa: S310 - the index's own https URL
            reasons = build_needs_torch(r.read(), url)
        if reasons:
            out[f"{item.name}=={item.version}"] = reasons
    return out


def wheel_tags(url: str) -> dict[str, str]:
    """A wheel URL's file name as its parts: name, version (with local tag), python, abi, platform."""
    name = url.rsplit("/", 1)[-1].replace("%2B", "+")
    m = _WHEEL.match(name)
    if not m:
        raise ValueError(f"url={url!r} is not allowed: not a wheel file name (name-version-py-abi-platform.whl)")
    return m.groupdict()


def parse_driver(text: str) -> tuple[int, ...]:
    """An NVIDIA driver version such as '580.65.06' as a tuple of ints (ValueError otherwise)."""
    text = text.strip()
    if not re.fullmatch(r"\d+(\.\d+)*", text):
        raise ValueError(f"driver version {text!r} is not allowed: expected numbers separated by dots")
    return tuple(int(p) for p in text.split("."))


def driver_ok(version: str, minimum: str = MIN_DRIVER) -> bool:
    """Whether the driver ``version`` is at least ``minimum`` (the cu130 wheels' need)."""
    return parse_driver(version) >= parse_driver(minimum)


@dataclass(frozen=True)
class NodeGpus:
    """What this node offers the GPU stack: torch's view, the NVIDIA driver, CUDA_VISIBLE_DEVICES."""

    count: int  # CUDA devices torch sees
    torch_version: str
    torch_cuda: str | None  # the CUDA torch was built for; None for a CPU build
    driver: str | None  # the NVIDIA driver's version; None when none was found
    driver_note: str  # where the driver version came from, or why there is none
    visible: str | None  # CUDA_VISIBLE_DEVICES, None when unset


def nvidia_driver(proc_file: Path = Path("/proc/driver/nvidia/version")) -> tuple[str | None, str]:
    """The NVIDIA driver's version and where it was read (nvidia-smi, else the kernel module's proc file), or
    None and why there is none. Never hangs: nvidia-smi gets 30 s."""
    why = "nvidia-smi is not on PATH"
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout.split()
            if out:
                return out[0], "nvidia-smi"
            why = "nvidia-smi lists no GPU"
        except (OSError, subprocess.SubprocessError) as err:
            why = f"nvidia-smi failed ({type(err).__name__})"
    try:
        found = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+(?:\.\d+)+)", proc_file.read_text())
    except OSError:
        return None, f"{why}, and {proc_file} does not exist: no NVIDIA kernel driver is loaded"
    return (found[1], str(proc_file)) if found else (None, f"{why}; {proc_file} names no version")


def node_gpus() -> NodeGpus:
    """``NodeGpus`` of this machine."""
    import os

    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    driver, note = nvidia_driver()
    return NodeGpus(count, torch.__version__, torch.version.cuda, driver, note, os.environ.get("CUDA_VISIBLE_DEVICES"))


def why_too_few(node: NodeGpus, wanted: int) -> str:
    """Why torch sees fewer than ``wanted`` GPUs, most basic cause first."""
    if node.torch_cuda is None:
        return f"torch {node.torch_version} is a CPU build: install the GPU stack ({COMMANDS[1]})"
    if node.driver is None:
        return f"no NVIDIA driver found ({node.driver_note})"
    if not driver_ok(node.driver):
        return (
            f"NVIDIA driver {node.driver} is older than {MIN_DRIVER}, the minimum for the CUDA {node.torch_cuda} "
            "build of torch: update the driver"
        )
    if node.visible is not None and len([d for d in node.visible.split(",") if d.strip()]) < wanted:
        return f"CUDA_VISIBLE_DEVICES={node.visible!r} hides GPUs"
    return f"torch {node.torch_version} (CUDA {node.torch_cuda}) with driver {node.driver} sees {node.count}"


def find_python(version: str = PYTHON) -> tuple[str | None, str]:
    """An interpreter of ``version`` on this machine (on PATH, else pyenv's) and where it was found, or None and
    why not. Each candidate is run to read its version (a pyenv shim can name one it cannot run)."""
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(str(p) for p in Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))
    for path in filter(None, candidates):
        try:
            out = subprocess.run(
                [path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True, text=True, timeout=60, check=True,
            ).stdout.strip()  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            continue
        if out == version:
            return path, f"Python {version} at {path}"
    return None, f"no Python {version} runs here (python{version} on PATH, ~/.pyenv/versions/{version}.*)"


def venv_with_pip(python: str, folder: Path) -> str:
    """A virtual environment of ``python`` in ``folder`` with this interpreter's pip version (an older pip resolves
    the gpu extra far slower: pip 23.2 took over 15 minutes where 26.3 takes one); its interpreter's path."""
    from importlib.metadata import version

    subprocess.run([python, "-m", "venv", str(folder)], check=True, timeout=RESOLVE_TIMEOUT_S)
    venv_python = str(folder / "bin" / "python")
    pip = [venv_python, "-m", "pip", "install", "--quiet", f"pip=={version('pip')}"]
    subprocess.run(pip, check=True, timeout=RESOLVE_TIMEOUT_S)
    return venv_python


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m brorl_lib.verl_recipe.gpu_install", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    fb = sub.add_parser("fallback", help=f"install {FLASH_ATTN_FALLBACK.rsplit('/', 1)[1]}, checked by its SHA-256")
    fb.add_argument("--sha256", default=FLASH_ATTN_FALLBACK_SHA256, help="the wheel's SHA-256 (64 hex digits)")
    args = p.parse_args(argv)
    try:
        cmd = fallback_command(args.sha256)
    except ValueError as err:
        print(f"[brorl] {err}", file=sys.stderr)
        return 2
    return subprocess.run([sys.executable, "-m", *cmd], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
