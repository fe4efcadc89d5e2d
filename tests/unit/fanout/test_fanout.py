"""modules/fanout.py (its work in module_utils/fanout/fanout_task.py): manifest and its record, probe, spread (a seed
thread and the module as the puller), check mode, bad input."""
from __future__ import annotations

import os
import socket
import threading

from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import agent as fa
from ansible_collections.mtslime.posttrain.plugins.modules import fanout as module

PIECE = 4096


def artifact(root):
    os.makedirs(root)
    with open(os.path.join(root, "config.json"), "w") as handle:
        handle.write("{}")
    with open(os.path.join(root, "model.safetensors"), "wb") as handle:
        handle.write(os.urandom(PIECE * 3 + 7))
    return root


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_manifest_is_recorded_and_reused_until_a_file_changes(tmp_path, run_module):
    src = artifact(str(tmp_path / "m"))
    result, failed = run_module(module, {"state": "manifest", "path": src, "piece_size": PIECE}, check_mode=True)
    assert not failed and not os.path.exists(src + ".fanout.json")
    result, failed = run_module(module, {"state": "manifest", "path": src, "piece_size": PIECE})
    assert not failed and not result["changed"] and len(result["manifest"]["pieces"]) == 4
    assert os.path.exists(src + ".fanout.json") and result["actions"][0].startswith("hashed 4 pieces")
    again, dummy = run_module(module, {"state": "manifest", "path": src, "piece_size": PIECE})
    assert again["id"] == result["id"] and again["actions"][0].startswith("reused the record")
    with open(os.path.join(src, "model.safetensors"), "ab") as handle:
        handle.write(b"more")
    changed, dummy = run_module(module, {"state": "manifest", "path": src, "piece_size": PIECE})
    assert changed["id"] != result["id"] and changed["actions"][0].startswith("hashed")


def test_probe_holds_only_the_recorded_unchanged_copy(tmp_path, run_module):
    src = artifact(str(tmp_path / "m"))
    manifest = run_module(module, {"state": "manifest", "path": src, "piece_size": PIECE})[0]["manifest"]
    result, dummy = run_module(module, {"state": "probe", "path": src, "manifest": manifest})
    assert result["holds"] and not result["changed"]
    other = artifact(str(tmp_path / "other"))
    result, dummy = run_module(module, {"state": "probe", "path": other, "manifest": manifest})
    assert not result["holds"] and result["partial_pieces"] == 0


def test_spread_pulls_from_a_seed_records_and_then_probes_as_held(tmp_path, run_module):
    src = artifact(str(tmp_path / "seed"))
    manifest = fa.build_manifest(src, PIECE)
    port = free_port()
    seed = {"name": "s1", "manifest": manifest, "token": "tok", "bind": "127.0.0.1", "port": port, "role": "seed",
            "src": src, "children": ["s2"], "idle_timeout": 10}
    results = {}
    thread = threading.Thread(target=lambda: results.update(seed=fa.run(seed, emit=lambda line: None)), daemon=True)
    thread.start()
    dest = str(tmp_path / "s2" / "model")
    log = str(tmp_path / "fanout.log")
    args = {"path": dest, "manifest": manifest, "name": "s2", "role": "pull", "bind": "127.0.0.1",
            "port": free_port(), "token": "tok", "upstreams": [{"name": "s1", "url": "http://127.0.0.1:%d" % port}],
            "log_file": log, "progress_interval": 1}
    predicted, failed = run_module(module, args, check_mode=True)
    assert not failed and predicted["changed"] and predicted["actions"] == [
        "would pull %s (%d bytes) from s1" % (dest, manifest["total"])]
    assert not os.path.exists(dest + fa.PARTIAL_SUFFIX)
    result, failed = run_module(module, args)
    thread.join(20)
    assert not failed, result
    assert result["changed"] and result["received"] == manifest["total"]
    assert result["sources"] == {"s1": manifest["total"]}
    assert results["seed"]["children_done"] == ["s2"]
    assert open(os.path.join(dest, "model.safetensors"), "rb").read() == open(
        os.path.join(src, "model.safetensors"), "rb").read()
    assert "fanout s2: 4/4 pieces" in open(log).read()
    probe, dummy = run_module(module, {"state": "probe", "path": dest, "manifest": manifest})
    assert probe["holds"]


def test_a_puller_without_a_live_upstream_fails_and_says_rerun(tmp_path, run_module):
    src = artifact(str(tmp_path / "seed"))
    manifest = fa.build_manifest(src, PIECE)
    result, failed = run_module(module, {
        "path": str(tmp_path / "n" / "model"), "manifest": manifest, "name": "n", "role": "pull",
        "bind": "127.0.0.1", "port": free_port(), "token": "tok", "stall_timeout": 1,
        "upstreams": [{"name": "gone", "url": "http://127.0.0.1:%d" % free_port()}]})
    assert failed and "rerun to resume" in result["msg"] and "gone" in result["msg"]


def test_bad_input_names_the_fix(tmp_path, run_module):
    result, failed = run_module(module, {"state": "manifest", "path": str(tmp_path / "none")})
    assert failed and "does not exist" in result["msg"] and "seed" in result["msg"]
    result, failed = run_module(module, {"state": "manifest", "path": str(tmp_path), "piece_size": 10})
    assert failed and "piece_size" in result["msg"]
    result, failed = run_module(module, {"state": "probe", "path": str(tmp_path), "manifest": {"id": "x"}})
    assert failed and "manifest lacks" in result["msg"]
    manifest = {"id": "x", "files": [], "pieces": [], "piece_size": PIECE, "total": 0}
    result, failed = run_module(module, {"path": str(tmp_path), "manifest": manifest, "role": "pull", "name": "n",
                                         "bind": "127.0.0.1", "token": "t"})
    assert failed and "needs upstreams" in result["msg"]
    result, failed = run_module(module, {"path": str(tmp_path), "manifest": manifest, "role": "pull", "name": "n",
                                         "bind": "127.0.0.1", "token": "t", "upstreams": [{"name": "a",
                                                                                           "url": "ftp://x"}]})
    assert failed and "http://address:port" in result["msg"]
