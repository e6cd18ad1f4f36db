"""The start model checked by content: SHA-256 of its weight files against the recorded values, in preflight."""

import hashlib
from types import SimpleNamespace

import pytest

from brorl_lib.verl_recipe import preflight, start_model


def _folder(tmp_path, files=None):
    files = files or {"model.safetensors": b"weights"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "config.json").write_text("{}")
    return tmp_path


def test_nothing_recorded_is_said_plainly_with_the_folders_hashes(tmp_path):
    folder = _folder(tmp_path)
    r = preflight.check_weights(str(folder))
    digest = hashlib.sha256(b"weights").hexdigest()
    assert r.ok and r.detail.startswith("NOT CHECKED: no SHA-256") and f"model.safetensors {digest}" in r.detail
    assert "--hub" in r.detail and "weights" in preflight.CHECKS


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
