"""The image fan-out through ansible-playbook on local nodes (loopback addresses 127.0.0.x, a /data each, this
machine's Docker engine): the seed saves a small image once, the archive is spread to the other storages, loaded
from a spread copy where the engine lacks the image and its ID checked; a rerun changes nothing; check mode writes
nothing; an archive of the wrong image is refused naming the file; a damaged copy no longer matches the fan-out's
record, is pulled again (every piece checked against the seed's manifest) and the damaged one moved aside."""
from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import socket
import subprocess
import sys
import tarfile

import pytest
import yaml

from runner import run_playbook

pytestmark = pytest.mark.docker
PLAYBOOK = "tests/integration/playbooks/fanout_image_local.yml"


def docker(*args, check=True, **kwargs):
    return subprocess.run(["docker", *args], capture_output=True, check=check, **kwargs)


@pytest.fixture
def image():
    """A tiny image of 9 MiB of random bytes (three fan-out pieces), made with docker import."""
    name = "mtslime-test/fanout-image:%s" % secrets.token_hex(4)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        payload = os.urandom((9 << 20) + 123)
        info = tarfile.TarInfo("payload.bin")
        info.size = len(payload)
        archive.addfile(info, io.BytesIO(payload))
    docker("import", "-", name, input=buffer.getvalue())
    yield name
    docker("rmi", "-f", name, check=False)


def sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def inventory(tmp_path, image):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    hosts = {}
    for index, (name, storage) in enumerate([("n1", "s1"), ("n2", "s2"), ("n3", "s3")]):
        hosts[name] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "slime_node_ip": "127.0.0.%d" % (index + 2), "slime_storage": storage,
                       "slime_fanout_image_archive": str(tmp_path / storage / "images" / "training.tar")}
    values = {"slime_fanout_port": port, "slime_fanout_artifacts": ["image"], "container_enabled": True,
              "container_image": image, "container_pull": "never"}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"slime_nodes": {"hosts": hosts}}, "vars": values}}))
    return str(path)


def test_image_saved_once_spread_loaded_checked_idempotent_and_a_damaged_copy_replaced(tmp_path, image):
    hosts = inventory(tmp_path, image)
    archive = {s: tmp_path / s / "images" / "training.tar" for s in ("s1", "s2", "s3")}
    image_id = json.loads(docker("image", "inspect", image).stdout)[0]["Id"]

    dry = run_playbook(PLAYBOOK, hosts, "--check", timeout=300)
    assert dry.rc == 0, dry.stdout[-3000:]
    assert not any(path.exists() for path in archive.values())
    assert any("would save %s" % image in " ".join(r.get("actions", [])) for r in dry.results("Save the image"))

    run = run_playbook(PLAYBOOK, hosts, extravars={"drop_image": True, "load_on": "n2"}, timeout=300)
    assert run.rc == 0, run.stdout[-3000:]
    saved = [r for r in run.results("Save the image") if "image_id" in r]
    assert len(saved) == 1 and saved[0]["changed"] and saved[0]["image_id"] == image_id
    assert sha256(archive["s2"]) == sha256(archive["s1"]) == sha256(archive["s3"])
    assert not [p for p in os.listdir(archive["s1"].parent) if ".saving-" in p]
    # n2 lacked the image (dropped from the engine) and loaded it from its own spread copy, with the seed's ID
    assert "n2: Load the image archive" in run.changed_tasks(), run.changed_tasks()
    assert json.loads(docker("image", "inspect", image).stdout)[0]["Id"] == image_id
    checked = run.results("Check the image against the archive")
    assert checked and not checked[0].get("failed") and not checked[0].get("skipped"), checked
    assert set(run.changed_hosts()) == {"n1", "n2", "n3"}

    again = run_playbook(PLAYBOOK, hosts, extravars={"load_on": "n2"}, timeout=300)
    assert again.rc == 0 and again.changed_hosts() == {}, again.changed_tasks()
    dry = run_playbook(PLAYBOOK, hosts, "--check", extravars={"load_on": "n2"}, timeout=300)
    assert dry.rc == 0 and dry.changed_hosts() == {}, dry.changed_tasks()

    # an archive whose image is not the one the seed saved: refused after the load, naming the file and the fix
    wrong = run_playbook(PLAYBOOK, hosts, extravars={"drop_image": True, "load_on": "n2",
                                                     "container_image_archive_ids": ["sha256:" + "0" * 64]},
                         timeout=300)
    assert wrong.rc != 0
    text = " ".join(wrong.stdout.split())
    assert "loaded from %s has ID %s" % (archive["s2"], image_id) in text, text[-2000:]
    assert "move it away and rerun" in text

    # damage s3's copy in place (same size): the fan-out no longer counts it as a holder, pulls it again, and moves
    # the damaged one aside
    with open(archive["s3"], "r+b") as handle:
        handle.seek(5 << 20)
        handle.write(b"X" * 64)
    os.utime(archive["s3"], (1, 1))
    third = run_playbook(PLAYBOOK, hosts, extravars={"load_on": "n3"}, timeout=300)
    assert third.rc == 0, third.stdout[-3000:]
    assert sha256(archive["s3"]) == sha256(archive["s1"])
    aside = [p for p in os.listdir(archive["s3"].parent) if ".replaced-" in p]
    assert len(aside) == 1 and set(third.changed_hosts()) == {"n3"}, third.changed_tasks()


def test_air_gapped_the_controller_holds_the_archive_and_its_ids_are_checked_on_load(tmp_path, image):
    hosts = inventory(tmp_path, image)
    controller = tmp_path / "controller"
    controller.mkdir()
    docker("save", "-o", str(controller / "training.tar"), image)
    image_id = json.loads(docker("image", "inspect", image).stdout)[0]["Id"]
    extra = {"slime_fanout_source": "controller", "slime_fanout_controller_dir": str(controller),
             "slime_fanout_controller_address": "127.0.0.1", "drop_image": True, "load_on": "n3"}
    run = run_playbook(PLAYBOOK, hosts, extravars=extra, timeout=300)
    assert run.rc == 0, run.stdout[-3000:]
    assert not run.results("Save the image") or all(r.get("skipped") for r in run.results("Save the image"))
    read = [r for r in run.results("Read the image IDs of the controller") if "ids" in r]
    assert read and read[0]["ids"] == [image_id]
    for storage in ("s1", "s2", "s3"):
        assert sha256(tmp_path / storage / "images" / "training.tar") == sha256(controller / "training.tar")
    assert "n3: Load the image archive" in run.changed_tasks(), run.changed_tasks()
    assert json.loads(docker("image", "inspect", image).stdout)[0]["Id"] == image_id
