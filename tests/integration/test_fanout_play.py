"""The fan-out tasks through ansible-playbook on local nodes (loopback addresses 127.0.0.x, a /data each, two of
them sharing one storage): one copy per storage, pulled through the chain; a rerun changes nothing; a damaged copy
is no longer a holder and is pulled again, the damaged one moved aside."""
from __future__ import annotations

import hashlib
import os
import sys

import yaml

from runner import run_playbook

PLAYBOOK = "tests/integration/playbooks/fanout_local.yml"


def digest(root):
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as handle:
                out[os.path.relpath(os.path.join(dirpath, name), root)] = hashlib.sha256(handle.read()).hexdigest()
    return out


def inventory(tmp_path, port):
    hosts = {}
    for index, (name, storage) in enumerate([("n1", "s1"), ("n2", "s2"), ("n2b", "s2"), ("n3", "s3")]):
        hosts[name] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "slime_node_ip": "127.0.0.%d" % (index + 2), "slime_storage": storage,
                       "slime_hf_model_dir": str(tmp_path / storage / "models" / "Qwen3-8B")}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"slime_nodes": {"hosts": hosts}},
                                            "vars": {"slime_fanout_port": port}}}))
    return str(path)


def test_fanout_tasks_one_copy_per_storage_idempotent_and_a_damaged_copy_replaced(tmp_path):
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    src = tmp_path / "s1" / "models" / "Qwen3-8B"
    src.mkdir(parents=True)
    (src / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    (src / "model.safetensors").write_bytes(os.urandom((4 << 20) * 3 + 11))
    hosts = inventory(tmp_path, port)

    run = run_playbook(PLAYBOOK, hosts, timeout=300)
    assert run.rc == 0, run.stdout[-3000:]
    for storage in ("s2", "s3"):
        assert digest(str(tmp_path / storage / "models" / "Qwen3-8B")) == digest(str(src))
    waits = run.results("Wait for the spread")
    assert any("fanout" in str(r) for r in waits)
    spread = {r["result"]["name"]: r["result"] for r in waits if r.get("finished")}
    total = os.path.getsize(src / "model.safetensors") + os.path.getsize(src / "config.json")
    assert spread["s3"]["sources"] == {"s2": total}  # pipelined through s2, not from the seed
    assert spread["s1"]["served"] == total and spread["s1"]["children_done"] == ["s2"]
    assert set(run.changed_hosts()) == {"n2", "n3"}
    # one puller per storage: n2b shares s2 with n2 and took no part
    assert not [e for e in run.events if e.get("event") == "runner_on_ok" and e["event_data"].get("host") == "n2b"
                and "Spread (" in (e["event_data"].get("task") or "") and not e["event_data"]["res"].get("skipped")]

    again = run_playbook(PLAYBOOK, hosts, timeout=300)
    assert again.rc == 0 and again.changed_hosts() == {}, again.changed_tasks()

    # damage s3's copy: its record no longer matches, it is pulled again and the damaged copy kept aside
    with open(tmp_path / "s3" / "models" / "Qwen3-8B" / "model.safetensors", "r+b") as handle:
        handle.write(b"X" * 16)
    third = run_playbook(PLAYBOOK, hosts, timeout=300)
    assert third.rc == 0, third.stdout[-3000:]
    assert digest(str(tmp_path / "s3" / "models" / "Qwen3-8B")) == digest(str(src))
    aside = [p for p in os.listdir(tmp_path / "s3" / "models") if ".replaced-" in p]
    assert len(aside) == 1 and set(third.changed_hosts()) == {"n3"}


def test_air_gapped_the_controller_seeds_the_first_storage_and_the_fleet_the_rest(tmp_path):
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    src = tmp_path / "controller" / "Qwen3-8B"
    src.mkdir(parents=True)
    (src / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    (src / "model.safetensors").write_bytes(os.urandom((4 << 20) * 2 + 5))
    hosts = inventory(tmp_path, port)
    extra = {"slime_fanout_source": "controller", "slime_fanout_controller_dir": str(tmp_path / "controller"),
             "slime_fanout_controller_address": "127.0.0.1"}
    run = run_playbook(PLAYBOOK, hosts, extravars=extra, timeout=300)
    assert run.rc == 0, run.stdout[-3000:]
    for storage in ("s1", "s2", "s3"):
        assert digest(str(tmp_path / storage / "models" / "Qwen3-8B")) == digest(str(src))
    spread = {r["result"]["name"]: r["result"] for r in run.results("Wait for the spread") if r.get("finished")}
    assert list(spread["s1"]["sources"]) == ["controller"] and list(spread["s3"]["sources"]) == ["s2"]
    served = [r["result"] for r in run.results("Wait for the controller") if r.get("finished")]
    assert served and served[0]["children_done"] == ["s1"]
    assert set(run.changed_hosts()) == {"n1", "n2", "n3"}
