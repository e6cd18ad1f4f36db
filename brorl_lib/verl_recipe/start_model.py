"""The start model checked by content: the SHA-256 of its weight files against values recorded here, and their
structure against the folder's config.json.

``check_structure`` reads each ``*.safetensors`` file's header with the safetensors library (which refuses a
header that does not parse or does not cover the file) and compares the tensors' names, shapes and dtypes with
what transformers' Qwen2ForCausalLM of that config.json holds (``models.qwen2.tensor_shapes``): a folder of random
bytes, a truncated download or another model's weights fail it whether or not hashes are recorded.

A folder's recorded revision can be missing (a copy made without huggingface-cli's metadata) or wrong; its bytes
cannot. ``WEIGHT_SHA256`` holds the SHA-256 of each weight file of ``MODEL_ID`` at ``configs.MODEL_REVISION``,
and ``WEIGHT_SHA256_SOURCE`` says where they were read. **No value is recorded yet**: none was found in a public
source reachable from the machines this recipe was written on (they cannot reach the Hugging Face Hub), and a hash
is never made up. Until the values are recorded, preflight's ``weights`` check says so, prints the folder's own
hashes, and fails only on the structure check.

To record them, on a machine that reaches the Hub (the Hub stores each large file through Git LFS, whose pointer
holds the file's SHA-256):

    python -m brorl_lib.verl_recipe.start_model --hub      # the Hub's LFS SHA-256 at the pinned revision
    python -m brorl_lib.verl_recipe.start_model --local /shared/prorlv2-3k   # the downloaded files' own

then copy the first command's dict into ``WEIGHT_SHA256`` and its source line into ``WEIGHT_SHA256_SOURCE``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from brorl_lib.models.qwen2 import tensor_shapes
from brorl_lib.verl_recipe import configs

MODEL_ID = "nvidia/Nemotron-Research-Reasoning-Qwen-1.5B"
COMMAND = "python -m brorl_lib.verl_recipe.start_model"
WEIGHT_PATTERNS = ("*.safetensors", "*.bin")  # transformers' weight files (model*.safetensors, pytorch_model*.bin)
# file name -> SHA-256 (64 hex) of MODEL_ID's weight files at configs.MODEL_REVISION; empty: not recorded yet
WEIGHT_SHA256: dict[str, str] = {}
WEIGHT_SHA256_SOURCE = ""  # where the values were read, e.g. the Hub's LFS metadata at the revision, and when
_HEX64 = re.compile(r"[0-9a-f]{64}")


def validate_record(recorded: Mapping[str, str], source: str) -> None:
    """Every recorded value a 64-hex SHA-256 of a weight file, and a source beside them; ValueError otherwise."""
    for name, digest in recorded.items():
        if not _HEX64.fullmatch(digest):
            raise ValueError(f"WEIGHT_SHA256[{name!r}]={digest!r} is not allowed: expected 64 lowercase hex digits")
        if not any(Path(name).match(p) for p in WEIGHT_PATTERNS):
            raise ValueError(
                f"WEIGHT_SHA256[{name!r}] is not allowed: not a weight file ({', '.join(WEIGHT_PATTERNS)})"
            )
    if recorded and not source.strip():
        raise ValueError("WEIGHT_SHA256_SOURCE='' is not allowed when hashes are recorded: say where they came from")


def weight_files(folder: Path) -> list[Path]:
    """The weight files directly in ``folder``, by name."""
    return sorted({p for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern) if p.is_file()})


def sha256(path: Path, chunk: int = 1 << 22) -> str:
    """The file's SHA-256 as hex, read in chunks of ``chunk`` bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def compare(
    folder: Path, recorded: Mapping[str, str] = WEIGHT_SHA256, source: str = WEIGHT_SHA256_SOURCE
) -> tuple[bool, str]:
    """(ok, detail): the folder's weight files against the recorded SHA-256. With nothing recorded, ok with a
    detail that says so and lists the folder's own hashes; a missing, extra or different file is not ok."""
    validate_record(recorded, source)
    files = weight_files(folder)
    if not files:
        return False, f"{folder} holds no weight files ({', '.join(WEIGHT_PATTERNS)})"
    found = {p.name: sha256(p) for p in files}
    if not recorded:
        listed = ", ".join(f"{k} {v}" for k, v in found.items())
        return True, (
            f"NOT CHECKED: no SHA-256 of {MODEL_ID}'s weights is recorded yet (start_model.WEIGHT_SHA256); "
            f"this folder's: {listed}. Record the Hub's: {COMMAND} --hub"
        )
    missing, extra = sorted(set(recorded) - set(found)), sorted(set(found) - set(recorded))
    differ = sorted(k for k in set(found) & set(recorded) if found[k] != recorded[k])
    if missing or extra or differ:
        parts = [f"missing {missing}" if missing else "", f"not recorded {extra}" if extra else ""]
        parts.append(f"different content {differ}" if differ else "")
        return False, f"{folder}: " + "; ".join(p for p in parts if p) + f" (recorded: {source})"
    return True, f"{len(found)} weight file(s) match the recorded SHA-256 ({source})"


FLOAT_DTYPES = ("F32", "BF16", "F16")  # safetensors' names of the dtypes a checkpoint's weights are stored in
HARMLESS = re.compile(r"^lm_head\.weight$|\.rotary_emb\.inv_freq$")  # stored by some checkpoints, unused here
MODEL_TYPES = ("qwen2",)  # the start model's (DeepSeek-R1-Distill-Qwen's config.json)


def stored_tensors(folder: Path) -> dict[str, tuple[tuple[int, ...], str]]:
    """Name -> (shape, dtype) of every tensor in the folder's ``*.safetensors`` files, read from their headers;
    ValueError naming the file that does not parse or that repeats a tensor of another."""
    from safetensors import SafetensorError, safe_open

    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="numpy") as f:
                for name in f.keys():
                    if name in out:
                        raise ValueError(f"{path.name}: tensor {name} is stored in another file too")
                    sl = f.get_slice(name)
                    out[name] = (tuple(sl.get_shape()), sl.get_dtype())
        except (SafetensorError, OSError) as err:
            raise ValueError(f"{path.name} is not a safetensors file ({err})") from err
    return out


def check_structure(folder: Path) -> tuple[bool, str]:
    """(ok, detail): the folder's safetensors weights hold exactly the tensors its config.json's model has, with their
    shapes, in a floating dtype (tied heads and rotary caches tolerated). Not ok, naming what differs, otherwise."""
    try:
        cfg = json.loads((folder / "config.json").read_text())
        model_type = cfg.get("model_type")
        if model_type not in MODEL_TYPES:
            return False, f"config.json: model_type={model_type!r}; the structure check knows {', '.join(MODEL_TYPES)}"
        want = tensor_shapes(cfg)
    except (OSError, ValueError, KeyError, TypeError) as err:
        return False, f"{folder}/config.json does not give the model's shapes ({type(err).__name__}: {err})"
    if not list(folder.glob("*.safetensors")):
        return False, f"{folder} holds no *.safetensors file: the structure check reads their headers"
    try:
        found = stored_tensors(folder)
    except ValueError as err:
        return False, str(err)
    missing = sorted(set(want) - set(found))
    extra = sorted(n for n in set(found) - set(want) if not HARMLESS.search(n))
    shapes = sorted(n for n in set(want) & set(found) if found[n][0] != want[n])
    dtypes = sorted(n for n, (_, d) in found.items() if d not in FLOAT_DTYPES)
    problems = [
        f"{len(missing)} tensor(s) of the config missing (e.g. {missing[:3]})" if missing else "",
        f"{len(extra)} tensor(s) the config does not have (e.g. {extra[:3]})" if extra else "",
        "; ".join(f"{n} is {list(found[n][0])}, the config gives {list(want[n])}" for n in shapes[:3]),
        f"{len(dtypes)} tensor(s) not in {'/'.join(FLOAT_DTYPES)} (e.g. {dtypes[:3]})" if dtypes else "",
    ]
    if any(problems):
        return False, f"{folder}: " + "; ".join(p for p in problems if p)
    stored = sorted({d for _, d in found.values()})
    return True, f"{len(want)} tensors with the shapes config.json gives ({model_type}, {'/'.join(stored)})"


def hub_sha256(model_id: str = MODEL_ID, revision: str = configs.MODEL_REVISION, api=None) -> dict[str, str]:
    """The Hub's LFS SHA-256 of the model's weight files at ``revision`` (needs the Hub; ``api``: an HfApi)."""
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    info = api.model_info(model_id, revision=revision, files_metadata=True)
    out = {}
    for s in info.siblings or []:
        if "/" not in s.rfilename and any(Path(s.rfilename).match(p) for p in WEIGHT_PATTERNS):
            if s.lfs is None:
                raise ValueError(f"{model_id}@{revision}: {s.rfilename} is not stored through LFS: no SHA-256 listed")
            out[s.rfilename] = s.lfs.sha256
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--hub", action="store_true", help="print the Hub's LFS SHA-256 at configs.MODEL_REVISION")
    g.add_argument("--local", metavar="MODEL_PATH", help="print the SHA-256 of the folder's weight files")
    args = p.parse_args(argv)
    if args.hub:
        print(f"WEIGHT_SHA256 = {hub_sha256()!r}")
        print(f'WEIGHT_SHA256_SOURCE = "the Hub\'s LFS metadata of {MODEL_ID} at {configs.MODEL_REVISION}"')
    else:
        print({p.name: sha256(p) for p in weight_files(Path(args.local).expanduser())})
    return 0


if __name__ == "__main__":
    sys.exit(main())
