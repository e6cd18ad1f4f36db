"""The start model checked by content: SHA-256 of its weight files against the recorded values, in preflight."""

import hashlib
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
from safetensors.numpy import save_file

from brorl_lib.models.qwen2 import parameter_count, tensor_shapes
from brorl_lib.verl_recipe import preflight, start_model

TINY = dict(model_type="qwen2", hidden_size=8, num_hidden_layers=2, intermediate_size=16, num_attention_heads=2,
            num_key_value_heads=1, vocab_size=32)  # fmt: skip


def _checkpoint(folder, cfg=TINY, change=None, shards=1):
    """A Qwen2 checkpoint of ``cfg``'s shapes (zeros), in ``shards`` safetensors files; ``change`` edits the tensors."""
    tensors = {n: np.zeros(shape, np.float32) for n, shape in tensor_shapes(cfg).items()}
    (change or (lambda t: None))(tensors)
    names = sorted(tensors)
    for i in range(shards):
        part = {n: tensors[n] for n in names[i::shards]}
        save_file(part, str(folder / f"model-{i + 1:05d}-of-{shards:05d}.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def _folder(tmp_path, files=None):
    files = files or {"model.safetensors": b"weights"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "config.json").write_text("{}")
    return tmp_path


def test_nothing_recorded_is_said_plainly_with_the_folders_hashes(tmp_path):
    folder = _checkpoint(tmp_path)
    r = preflight.check_weights(str(folder))
    digest = start_model.sha256(folder / "model-00001-of-00001.safetensors")
    assert (
        r.ok
        and r.detail.startswith("NOT CHECKED: no SHA-256")
        and f"model-00001-of-00001.safetensors {digest}" in r.detail
    )
    assert "--hub" in r.detail and "weights" in preflight.CHECKS
    assert r.detail.endswith("structure: 27 tensors with the shapes config.json gives (qwen2, F32)")


def test_a_folder_of_random_bytes_named_like_weights_fails_preflight(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(os.urandom(1024))
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    r = preflight.check_weights(str(tmp_path))
    assert not r.ok and "structure: model.safetensors is not a safetensors file" in r.detail
    assert r.fix.startswith("huggingface-cli download")
    (tmp_path / "t").mkdir()
    truncated = _checkpoint(tmp_path / "t")
    path = truncated / "model-00001-of-00001.safetensors"
    path.write_bytes(path.read_bytes()[:-8])  # an interrupted download
    assert not preflight.check_weights(str(truncated)).ok


@pytest.mark.parametrize(
    ("change", "cfg", "message"),
    [
        (lambda t: t.pop("model.layers.1.mlp.down_proj.weight"), TINY, "1 tensor(s) of the config missing"),
        (lambda t: t.update(extra=np.zeros(2, np.float32)), TINY, "1 tensor(s) the config does not have"),
        (lambda t: t.update({"lm_head.weight": np.zeros((31, 8), np.float32)}), TINY,
         "lm_head.weight is [31, 8], the config gives [32, 8]"),
        (lambda t: t.update({"model.norm.weight": np.zeros(8, np.int32)}), TINY, "1 tensor(s) not in F32/BF16/F16"),
        (None, {**TINY, "model_type": "llama"}, "model_type='llama'; the structure check knows qwen2"),
    ],
)  # fmt: skip
def test_weights_of_another_shape_or_model_fail_naming_what_differs(tmp_path, change, cfg, message):
    folder = _checkpoint(tmp_path, change=change, shards=2)
    if cfg is not TINY:
        (folder / "config.json").write_text(json.dumps(cfg))
    ok, detail = start_model.check_structure(folder)
    assert not ok and message in detail, detail


def test_a_sharded_checkpoint_passes_and_a_tied_head_may_be_stored(tmp_path):
    tied = {**TINY, "tie_word_embeddings": True}
    folder = _checkpoint(tmp_path, tied, change=lambda t: t.update({"lm_head.weight": np.zeros((32, 8), np.float32)}),
                         shards=3)  # fmt: skip
    assert start_model.check_structure(folder) == (True, "26 tensors with the shapes config.json gives (qwen2, F32)")


def test_tensor_shapes_sum_to_the_parameter_count():
    for tied in (False, True):
        cfg = {**TINY, "tie_word_embeddings": tied}
        assert sum(int(np.prod(s)) for s in tensor_shapes(cfg).values()) == parameter_count(cfg)


def test_recorded_hashes_pass_when_equal_and_name_the_file_that_differs(tmp_path):
    folder = _folder(tmp_path, {"model-00001.safetensors": b"a", "model-00002.safetensors": b"b"})
    good = {
        n: hashlib.sha256(d).hexdigest()
        for n, d in (("model-00001.safetensors", b"a"), ("model-00002.safetensors", b"b"))
    }
    assert start_model.compare(folder, good, "test values") == (
        True,
        "2 weight file(s) match the recorded SHA-256 (test values)",
    )
    bad = {**good, "model-00002.safetensors": "0" * 64}
    ok, detail = start_model.compare(folder, bad, "test values")
    assert not ok and "different content ['model-00002.safetensors']" in detail
    ok, detail = start_model.compare(folder, {**good, "model-00003.safetensors": "1" * 64}, "test values")
    assert not ok and "missing ['model-00003.safetensors']" in detail


def test_a_folder_without_weights_or_a_bad_record_is_refused(tmp_path):
    assert not preflight.check_weights(str(tmp_path)).ok  # no weight files
    assert not preflight.check_weights(str(tmp_path / "absent")).ok
    with pytest.raises(ValueError, match=r"WEIGHT_SHA256\['model.safetensors'\]='abc' is not allowed"):
        start_model.validate_record({"model.safetensors": "abc"}, "x")
    with pytest.raises(ValueError, match="WEIGHT_SHA256_SOURCE='' is not allowed"):
        start_model.validate_record({"model.safetensors": "a" * 64}, "")
    with pytest.raises(ValueError, match="not a weight file"):
        start_model.validate_record({"config.json": "a" * 64}, "x")


def test_the_record_holds_no_invented_value():
    start_model.validate_record(start_model.WEIGHT_SHA256, start_model.WEIGHT_SHA256_SOURCE)
    assert bool(start_model.WEIGHT_SHA256) == bool(start_model.WEIGHT_SHA256_SOURCE)


def test_hub_values_are_read_from_lfs_metadata():
    sib = lambda name, sha: SimpleNamespace(rfilename=name, lfs=SimpleNamespace(sha256=sha) if sha else None)  # noqa: E731
    info = SimpleNamespace(
        siblings=[sib("model.safetensors", "f" * 64), sib("config.json", None), sib("sub/x.bin", "e" * 64)]
    )
    api = SimpleNamespace(model_info=lambda *a, **k: info)
    assert start_model.hub_sha256(api=api) == {"model.safetensors": "f" * 64}
    info.siblings.append(sib("pytorch_model.bin", None))
    with pytest.raises(ValueError, match="not stored through LFS"):
        start_model.hub_sha256(api=api)
