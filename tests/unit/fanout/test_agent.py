"""module_utils/fanout/agent.py: pieces, the token-guarded server, the verifying and resumable puller.
Real sockets on loopback, real files; nodes are threads."""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import threading

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import agent as fa

PIECE = 4096
TOKEN = "t0ken"


def make_artifact(root):
    os.makedirs(os.path.join(root, "sub"))
    with open(os.path.join(root, "config.json"), "w") as handle:
        handle.write('{"a": 1}')
    with open(os.path.join(root, "sub", "model.safetensors"), "wb") as handle:
        handle.write(os.urandom(PIECE * 5 + 123))
    open(os.path.join(root, "empty"), "w").close()
    return root


def tree_digest(root):
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


def free_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def config(name, manifest, role, tmp, **extra):
    base = {"name": name, "manifest": manifest, "token": TOKEN, "bind": "127.0.0.1", "role": role,
            "progress_interval": 0.5, "idle_timeout": 10, "stall_timeout": 10, "wait": 0.5, "parent_patience": 1,
            "progress_file": str(tmp / ("%s.progress.json" % name))}
    base.update(extra)
    return base


def start(cfg, results, lines):
    def target():
        try:
            results[cfg["name"]] = fa.run(cfg, emit=lines.append)
        except Exception as exc:  # noqa: BLE001 (the test reads it)
            results[cfg["name"]] = exc
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_manifest_covers_every_byte_and_its_id_is_the_content(tmp_path):
    src = make_artifact(str(tmp_path / "model"))
    manifest = fa.build_manifest(src, PIECE)
    assert [f["path"] for f in manifest["files"]] == ["config.json", "empty", "sub/model.safetensors"]
    assert manifest["total"] == 8 + PIECE * 5 + 123 and len(manifest["pieces"]) == 6
    assert fa.build_manifest(src, PIECE)["id"] == manifest["id"]
    with open(os.path.join(src, "config.json"), "w") as handle:
        handle.write('{"a": 2}')
    assert fa.build_manifest(src, PIECE)["id"] != manifest["id"]
    single = fa.build_manifest(os.path.join(src, "sub", "model.safetensors"), PIECE)
    assert single["files"][0]["path"] == "" and len(single["pieces"]) == 6


def test_a_symlink_is_refused(tmp_path):
    src = make_artifact(str(tmp_path / "model"))
    os.symlink("config.json", os.path.join(src, "link"))
    with pytest.raises(fa.FanoutError, match="symbolic link"):
        fa.build_manifest(src, PIECE)


def test_a_chain_of_three_pulls_through_each_other_and_ends_identical(tmp_path):
    src = make_artifact(str(tmp_path / "seed"))
    manifest = fa.build_manifest(src, PIECE)
    ports = [free_port() for dummy in range(3)]
    url = ["http://127.0.0.1:%d" % p for p in ports]
    results, lines = {}, []
    threads = [
        start(config("seed", manifest, "seed", tmp_path, src=src, port=ports[0], children=["a"]), results, lines),
        start(config("a", manifest, "pull", tmp_path, dest=str(tmp_path / "a" / "model"), port=ports[1],
                     upstreams=[{"name": "seed", "url": url[0]}], children=["b"]), results, lines),
        start(config("b", manifest, "pull", tmp_path, dest=str(tmp_path / "b" / "model"), port=ports[2],
                     upstreams=[{"name": "a", "url": url[1]}, {"name": "seed", "url": url[0]}]), results, lines),
    ]
    for thread in threads:
        thread.join(30)
    for name in ("seed", "a", "b"):
        assert isinstance(results[name], dict), results[name]
    assert tree_digest(str(tmp_path / "b" / "model")) == tree_digest(src)
    assert tree_digest(str(tmp_path / "a" / "model")) == tree_digest(src)
    assert not os.path.exists(str(tmp_path / "a" / "model") + fa.PARTIAL_SUFFIX)
    # b got everything from its parent, the seed sent one copy, and every server stopped when its child was done
    assert results["b"]["sources"] == {"a": manifest["total"]}
    assert results["seed"]["served"] == manifest["total"] and results["seed"]["children_done"] == ["a"]
    assert results["a"]["children_done"] == ["b"] and not results["a"].get("idle_stop")
    progress = json.load(open(tmp_path / "b.progress.json"))
    assert progress["final"] and progress["pieces"] == progress["of"] == 6
    assert any(line.startswith("fanout b: 6/6 pieces") for line in lines)


def test_a_peer_that_serves_a_bad_piece_is_never_used_again_and_the_seed_completes(tmp_path):
    src = make_artifact(str(tmp_path / "seed"))
    manifest = fa.build_manifest(src, PIECE)
    bad = make_artifact(str(tmp_path / "bad"))  # same layout, other bytes: a tampered copy
    shutil_copy = open(os.path.join(src, "config.json")).read()
    with open(os.path.join(bad, "config.json"), "w") as handle:
        handle.write(shutil_copy)
    ports = [free_port(), free_port()]
    results, lines = {}, []
    threads = [
        start(config("seed", manifest, "seed", tmp_path, src=src, port=ports[0], children=["c"]), results, lines),
        start(config("bad", manifest, "seed", tmp_path, src=bad, port=ports[1], children=["c"], idle_timeout=2),
              results, lines),
        start(config("c", manifest, "pull", tmp_path, dest=str(tmp_path / "c" / "model"),
                     upstreams=[{"name": "bad", "url": "http://127.0.0.1:%d" % ports[1]},
                                {"name": "seed", "url": "http://127.0.0.1:%d" % ports[0]}]), results, lines),
    ]
    for thread in threads:
        thread.join(30)
    assert results["c"]["refused"] == ["bad"]
    assert tree_digest(str(tmp_path / "c" / "model")) == tree_digest(src)
    assert any("does not match the manifest; bad is not used again" in line for line in lines)


def test_a_cut_pull_resumes_from_its_state_and_rechecks_what_it_holds(tmp_path):
    src = make_artifact(str(tmp_path / "seed"))
    manifest = fa.build_manifest(src, PIECE)
    dest = str(tmp_path / "n" / "model")
    partial = dest + fa.PARTIAL_SUFFIX
    # what a cut run leaves: pieces 0-2 written and recorded, piece 2 damaged on disk afterwards
    store = fa.Store(os.path.join(partial, "data"), manifest)
    os.makedirs(partial)
    store.layout.create()
    seed_layout = fa.Layout(src, manifest)
    for index in range(3):
        store.put(index, seed_layout.read(index))
    fa.save_state(partial, manifest, store)
    store.layout.write(2, b"x" * PIECE)
    port = free_port()
    results, lines = {}, []
    threads = [start(config("seed", manifest, "seed", tmp_path, src=src, port=port, children=["n"]), results, lines),
               start(config("n", manifest, "pull", tmp_path, dest=dest,
                            upstreams=[{"name": "seed", "url": "http://127.0.0.1:%d" % port}]), results, lines)]
    for thread in threads:
        thread.join(30)
    assert results["n"]["resumed_pieces"] == 2  # the damaged piece was not trusted
    assert results["n"]["received"] == manifest["total"] - 2 * PIECE
    assert tree_digest(dest) == tree_digest(src)


def test_an_existing_destination_is_moved_aside_not_deleted(tmp_path):
    src = make_artifact(str(tmp_path / "seed"))
    manifest = fa.build_manifest(src, PIECE)
    dest = tmp_path / "n" / "model"
    dest.mkdir(parents=True)
    (dest / "old").write_text("keep me")
    port = free_port()
    results, lines = {}, []
    threads = [start(config("seed", manifest, "seed", tmp_path, src=src, port=port, children=["n"]), results, lines),
               start(config("n", manifest, "pull", tmp_path, dest=str(dest),
                            upstreams=[{"name": "seed", "url": "http://127.0.0.1:%d" % port}]), results, lines)]
    for thread in threads:
        thread.join(30)
    aside = results["n"]["moved_aside"]
    assert ".replaced-" in aside and open(os.path.join(aside, "old")).read() == "keep me"


def test_the_server_wants_the_token_and_stops_on_idle(tmp_path):
    src = make_artifact(str(tmp_path / "seed"))
    manifest = fa.build_manifest(src, PIECE)
    store = fa.Store(src, manifest, complete=True)
    server = fa.serve(store, "127.0.0.1", 0, TOKEN)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        conn.request("GET", "/piece/0")
        assert conn.getresponse().status == 401
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        conn.request("GET", "/piece/0", headers={"Authorization": "Bearer wrong"})
        assert conn.getresponse().status == 401
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        conn.request("GET", "/piece/99", headers={"Authorization": "Bearer " + TOKEN})
        assert conn.getresponse().status == 416
    finally:
        server.shutdown()
        server.server_close()
    result = fa.run(config("seed", manifest, "seed", tmp_path, src=src, children=["never"], idle_timeout=1),
                    emit=lambda line: None)
    assert result["idle_stop"] and result["children_done"] == []


def test_a_puller_without_a_live_upstream_fails_naming_them_and_keeps_its_partial(tmp_path):
    src = make_artifact(str(tmp_path / "seed"))
    manifest = fa.build_manifest(src, PIECE)
    dest = str(tmp_path / "n" / "model")
    cfg = config("n", manifest, "pull", tmp_path, dest=dest, stall_timeout=1,
                 upstreams=[{"name": "gone", "url": "http://127.0.0.1:%d" % free_port()}])
    with pytest.raises(fa.FanoutError, match="no upstream gave a piece for 1 s .gone.; rerun to resume"):
        fa.run(cfg, emit=lambda line: None)
    assert os.path.isdir(dest + fa.PARTIAL_SUFFIX) and not os.path.exists(dest)


def test_a_single_file_artifact_the_data_archive(tmp_path):
    src = tmp_path / "seed" / "AIME_data.tgz"
    src.parent.mkdir()
    src.write_bytes(os.urandom(PIECE * 2 + 99))
    manifest = fa.build_manifest(str(src), PIECE)
    port = free_port()
    dest = tmp_path / "n" / "AIME_data.tgz"
    results, lines = {}, []
    threads = [start(config("seed", manifest, "seed", tmp_path, src=str(src), port=port, children=["n"]), results,
                     lines),
               start(config("n", manifest, "pull", tmp_path, dest=str(dest),
                            upstreams=[{"name": "seed", "url": "http://127.0.0.1:%d" % port}]), results, lines)]
    for thread in threads:
        thread.join(30)
    assert isinstance(results["n"], dict), results["n"]
    assert dest.read_bytes() == src.read_bytes()
    assert not os.path.exists(str(dest) + fa.PARTIAL_SUFFIX)


def test_a_fallback_upstream_stays_up_while_the_puller_works_from_a_nearer_one(tmp_path, monkeypatch):
    src = make_artifact(str(tmp_path / "seed"))
    manifest = fa.build_manifest(src, PIECE)
    real = fa.piece_ok

    def slow(manifest_, index, data):  # a slow link: the pull takes ~2 s, the fallback's idle timeout is 1 s
        import time
        time.sleep(0.35)
        return real(manifest_, index, data)

    monkeypatch.setattr(fa, "piece_ok", slow)
    near, far = free_port(), free_port()
    results, lines = {}, []
    threads = [
        start(config("near", manifest, "seed", tmp_path, src=src, port=near, children=["c"]), results, lines),
        start(config("far", manifest, "seed", tmp_path, src=src, port=far, children=["c"], idle_timeout=1), results,
              lines),
        start(config("c", manifest, "pull", tmp_path, dest=str(tmp_path / "c" / "m"), heartbeat=0.3,
                     upstreams=[{"name": "near", "url": "http://127.0.0.1:%d" % near},
                                {"name": "far", "url": "http://127.0.0.1:%d" % far}]), results, lines),
    ]
    for thread in threads:
        thread.join(30)
    assert results["c"]["sources"] == {"near": manifest["total"]}
    assert not results["far"].get("idle_stop") and results["far"]["children_done"] == ["c"]


def test_a_parent_that_starts_late_is_waited_for_not_bypassed(tmp_path):
    import time
    src = make_artifact(str(tmp_path / "seed"))
    manifest = fa.build_manifest(src, PIECE)
    parent, seed = free_port(), free_port()
    results, lines = {}, []
    threads = [
        start(config("seed", manifest, "seed", tmp_path, src=src, port=seed, children=["c"], idle_timeout=3),
              results, lines),
        start(config("c", manifest, "pull", tmp_path, dest=str(tmp_path / "c" / "m"), parent_patience=4,
                     upstreams=[{"name": "parent", "url": "http://127.0.0.1:%d" % parent},
                                {"name": "seed", "url": "http://127.0.0.1:%d" % seed}]), results, lines),
    ]
    time.sleep(1.5)  # the parent's server is not up yet: c must not take everything from the seed meanwhile
    threads.append(start(config("parent", manifest, "seed", tmp_path, src=src, port=parent, children=["c"]),
                         results, lines))
    for thread in threads:
        thread.join(30)
    assert results["c"]["sources"] == {"parent": manifest["total"]}
