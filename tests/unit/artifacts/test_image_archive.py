"""module_utils/artifacts/image_archive.py and modules/image_archive.py: which image a docker save archive holds
(classic and containerd layouts), torn and foreign archives, the save through a temporary file, the module's
keep/save/move-aside decisions, check mode and its messages."""
from __future__ import annotations

import io
import json
import os
import tarfile

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import image_archive as ia
from ansible_collections.mtslime.posttrain.plugins.modules import image_archive as module

HEX = "3f57d9401f8d42f986df300f0c69192fc41da28ccc8d797829467780db3dd741"
OTHER = "a" * 64
IMAGE = "registry.example/team/training-suite:v2"


def write_archive(path, config_hex=HEX, tags=(IMAGE,), layout="classic", layer_bytes=4096, index_digest=None):
    """A tar laid out as `docker save` writes it: layers, the config and manifest.json last."""
    config = "%s.json" % config_hex if layout == "classic" else "blobs/sha256/%s" % config_hex
    layer = "%s/layer.tar" % ("b" * 64) if layout == "classic" else "blobs/sha256/%s" % ("c" * 64)
    members = [(layer, os.urandom(layer_bytes)), (config, b"{}")]
    if index_digest:
        members.append(("index.json", json.dumps({"manifests": [{"digest": index_digest}]}).encode()))
    members.append(("manifest.json", json.dumps([{"Config": config, "RepoTags": list(tags),
                                                  "Layers": [layer]}]).encode()))
    with tarfile.open(path, "w") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return str(path)


def test_classic_and_containerd_layouts_give_the_image_ids_and_names(tmp_path):
    classic = ia.read(write_archive(tmp_path / "a.tar"))
    assert classic == {"ids": ["sha256:" + HEX], "repo_tags": [IMAGE]}
    oci = ia.read(write_archive(tmp_path / "b.tar", layout="containerd", index_digest="sha256:" + OTHER))
    assert oci["ids"] == ["sha256:" + HEX, "sha256:" + OTHER]


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_a_torn_archive_is_named_torn(tmp_path, cut):
    path = write_archive(tmp_path / "a.tar", layer_bytes=64 << 10)
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:
        handle.truncate(int(size * cut))
    with pytest.raises(ia.ImageArchiveError) as exc:
        ia.read(path)
    assert path in str(exc.value) and ("torn" in str(exc.value) or "no manifest.json" in str(exc.value))


def test_missing_foreign_and_damaged_files_are_refused_naming_the_file(tmp_path):
    with pytest.raises(ia.ImageArchiveError, match="does not exist"):
        ia.read(str(tmp_path / "none.tar"))
    text = tmp_path / "notes.tar"
    text.write_text("not a tar at all\n" * 100)
    with pytest.raises(ia.ImageArchiveError, match="not a readable tar archive"):
        ia.read(str(text))
    plain = tmp_path / "plain.tar"
    with tarfile.open(plain, "w") as archive:
        info = tarfile.TarInfo("hello.txt")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(ia.ImageArchiveError, match="no manifest.json"):
        ia.read(str(plain))


def test_problem_names_a_different_image_or_a_missing_name():
    info = {"ids": ["sha256:" + HEX], "repo_tags": [IMAGE]}
    assert ia.problem(info, IMAGE, "sha256:" + HEX) is None
    assert "not sha256:" + OTHER in ia.problem(info, IMAGE, "sha256:" + OTHER)
    assert "does not name registry.example/team/other:latest" in ia.problem(
        info, "registry.example/team/other", "sha256:" + HEX)
    assert ia.tag_of("localhost:5000/x") == "localhost:5000/x:latest"
    assert ia.tag_of("x@sha256:" + HEX) is None


def fake_save(tmp_path, **kwargs):
    def run_save(temp):
        write_archive(temp, **kwargs)
        return 0, ""
    return run_save


def test_save_goes_through_a_temporary_file_and_keeps_the_old_one_aside(tmp_path):
    path = str(tmp_path / "images" / "t.tar")
    info, moved = ia.save(path, IMAGE, "sha256:" + HEX, fake_save(tmp_path))
    assert info["ids"] == ["sha256:" + HEX] and moved is None and os.listdir(tmp_path / "images") == ["t.tar"]
    info, moved = ia.save(path, IMAGE, "sha256:" + HEX, fake_save(tmp_path), move_aside=lambda p: p + ".old")
    assert moved == path + ".old"  # the callback decides where; the module passes aside.move_aside


def test_a_failed_or_wrong_save_leaves_the_final_path_as_it_was(tmp_path):
    path = write_archive(tmp_path / "t.tar", config_hex=OTHER)
    before = open(path, "rb").read()

    def torn(temp):
        with open(temp, "wb") as handle:
            handle.write(b"\0" * 700)
        return 1, "write /data: no space left on device"
    with pytest.raises(ia.ImageArchiveError, match="no space left on device"):
        ia.save(path, IMAGE, "sha256:" + HEX, torn)
    with pytest.raises(ia.ImageArchiveError, match="does not match the image"):
        ia.save(path, IMAGE, "sha256:" + HEX, fake_save(tmp_path, config_hex=OTHER))
    assert open(path, "rb").read() == before and os.listdir(tmp_path) == ["t.tar"]


class FakeDocker:
    """The Docker CLI's two calls, answered from a dict of images (what the engine holds)."""

    def __init__(self, images):
        self.images, self.calls = images, []

    def __call__(self, argv, **kwargs):
        self.calls.append(argv[1:3])
        if argv[1:3] == ["image", "inspect"]:
            image_id = self.images.get(argv[-1])
            return (0, image_id + "\n", "") if image_id else (1, "", "Error: No such image: %s" % argv[-1])
        if argv[1] == "save":
            write_archive(argv[3], config_hex=self.images[argv[4]][len("sha256:"):], tags=[argv[4]])
            return 0, "", ""
        raise AssertionError(argv)


@pytest.fixture
def engine(monkeypatch):
    from ansible.module_utils import basic
    fake = FakeDocker({IMAGE: "sha256:" + HEX})
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda _module, argv, **kwargs: fake(argv, **kwargs))
    return fake


def test_module_saves_once_then_keeps_and_moves_a_different_archive_aside(tmp_path, run_module, engine):
    path = str(tmp_path / "images" / "t.tar")
    result, failed = run_module(module, {"path": path, "image": IMAGE}, check_mode=True)
    assert not failed and result["changed"] and result["actions"][0].startswith("would save") and not os.path.exists(
        path)
    result, failed = run_module(module, {"path": path, "image": IMAGE})
    assert not failed and result["changed"] and result["ids"] == ["sha256:" + HEX]
    result, failed = run_module(module, {"path": path, "image": IMAGE})
    assert not failed and not result["changed"] and ["image", "inspect"] in engine.calls
    engine.images[IMAGE] = "sha256:" + OTHER  # the engine's image moved on: the archive is saved again
    result, failed = run_module(module, {"path": path, "image": IMAGE})
    assert not failed and result["changed"] and ".replaced-" in result["moved_aside"]
    assert ia.read(path)["ids"] == ["sha256:" + OTHER] and ia.read(result["moved_aside"])["ids"] == ["sha256:" + HEX]


def test_module_read_and_its_failure_messages(tmp_path, run_module, engine):
    path = write_archive(tmp_path / "c.tar")
    result, failed = run_module(module, {"state": "read", "path": path})
    assert not failed and result["image_id"] == "sha256:" + HEX and result["repo_tags"] == [IMAGE]
    result, failed = run_module(module, {"state": "read", "path": str(tmp_path / "none.tar")})
    assert failed and "none.tar does not exist" in result["msg"]
    result, failed = run_module(module, {"path": str(tmp_path / "x.tar"), "image": "team/absent:1"})
    assert failed and "lacks team/absent:1; pull or load it here first" in result["msg"]
    result, failed = run_module(module, {"path": str(tmp_path / "x.tar"), "image": "team/absent:1"}, check_mode=True)
    assert not failed and result["changed"] and "once this node's engine has it" in result["actions"][0]
