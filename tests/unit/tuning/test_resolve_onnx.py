"""``resolve_onnx``: the forms of an ONNX reference that are accepted, and what is refused."""
import os

import pytest

from tuning.services import resolve_onnx


@pytest.fixture
def data(tmp_path, settings, monkeypatch):
    d = tmp_path / "data"
    (d / "models").mkdir(parents=True)
    (d / "models" / "m.onnx").write_bytes(b"x")
    (tmp_path / "outside.onnx").write_bytes(b"x")
    settings.DATA_DIR = str(d)
    settings.VAR_DIR = str(tmp_path / "var")
    monkeypatch.chdir(tmp_path)
    return d


def test_relative_to_data_as_a_path_into_it_and_absolute(data):
    want = (data / "models" / "m.onnx").resolve()
    assert resolve_onnx("models/m.onnx") == want
    assert resolve_onnx("data/models/m.onnx") == want  # from the working directory
    assert resolve_onnx(str(want)) == want


@pytest.mark.parametrize("ref", ["outside.onnx", "../outside.onnx", "data/../outside.onnx", "models/missing.onnx"])
def test_a_file_outside_data_is_refused_like_a_missing_one(data, ref):
    assert os.path.exists(data.parent / "outside.onnx")
    with pytest.raises(FileNotFoundError, match=r"no ONNX model .*: give an upload id or a file under the data folder"):
        resolve_onnx(ref)
