"""Fan-out on real containers: three nodes without shared storage on a private network, one artifact spread
from the seed node through a pipelined chain; the last node's link is cut mid-way (the others go on), the rerun
completes it from what it holds; a tampered peer copy is refused and the seed serves instead."""
from __future__ import annotations

import hashlib
import os
import time

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import agent as fa
from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import plan as fp

from fanout_bed import Bed, make_artifact

pytestmark = pytest.mark.docker
PATH = "/data/models/Qwen3-8B"


def digest(root):
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as handle:
                out[os.path.relpath(path, root)] = hashlib.sha256(handle.read()).hexdigest()
    return out


@pytest.fixture
def bed(tmp_path):
    bed = Bed("mtslime-fanout-test", "172.31.247", str(tmp_path / "nodes"), 3).up()
    yield bed
    bed.down()


def storages(bed):
    return [{"name": n, "node": n, "address": bed.ip(n)} for n in bed.names]


def test_spread_cut_link_rerun_and_tampered_peer(bed):
    n1, n2, n3 = bed.names
    source = make_artifact(os.path.join(bed.data(n1), "models", "Qwen3-8B"), 24)
    manifest = fa.build_manifest(source, 1 << 20)
    for name in bed.names:
        bed.limit(name, "16mbit")  # ≈ 13 s per copy per hop: slow enough to cut in the middle

    plan = fp.plan(storages(bed), holders=[n1])
    assert plan["chains"] == [[n2, n3]]
    configs = bed.configs(plan, manifest, PATH, stall_timeout=8, idle_timeout=8, parent_patience=3, wait=2,
                          timeout=5, progress_interval=1)
    procs = bed.start(configs)
    # cut n3's link once it holds a third of the pieces
    end = time.time() + 60
    while time.time() < end:
        progress = bed.progress(n3)
        if progress and progress["pieces"] >= len(manifest["pieces"]) // 3:
            break
        time.sleep(0.3)
    else:
        pytest.fail("n3 never got a third of the pieces: %s" % bed.finish(procs, 5))
    bed.cut(n3)
    results = bed.finish(procs, timeout=90)
    bed.reconnect(n3)

    # the others went on: n2 complete and identical, the seed and n2 stopped on their own (n3 never said done)
    assert results[n2][0] == 0, results[n2]
    assert digest(os.path.join(bed.data(n2), "models", "Qwen3-8B")) == digest(source)
    assert results[n1][0] == 0 and results[n1][1]["children_done"] == [n2]
    assert results[n2][1].get("idle_stop") is True
    # n3 failed naming what to do, and kept what it had
    assert results[n3][0] == 1 and "rerun to resume" in results[n3][1]["msg"], results[n3]
    partial = os.path.join(bed.data(n3), "models", "Qwen3-8B" + fa.PARTIAL_SUFFIX)
    assert os.path.isdir(partial) and not os.path.exists(os.path.join(bed.data(n3), "models", "Qwen3-8B"))
    held = bed.progress(n3)["pieces"]
    assert 0 < held < len(manifest["pieces"])

    # tamper n2's complete copy: a peer whose copy no longer matches the manifest
    shard = os.path.join(bed.data(n2), "models", "Qwen3-8B", "model-00001-of-00001.safetensors")
    bed_sh = ["docker", "exec", n2, "python3", "-c",
              "f=open('/data/models/Qwen3-8B/model-00001-of-00001.safetensors','r+b'); f.seek(%d); f.write(b'X'*64)"
              % ((len(manifest["pieces"]) - 2) << 20)]
    import subprocess
    subprocess.run(bed_sh, check=True)
    assert digest(os.path.dirname(shard)) != digest(source)

    # the rerun: n1 and n2 hold a copy by their records, n3 pulls; n2 (nearest) is tried first, refused, n1 serves
    plan = fp.plan(storages(bed), holders=[n1, n2])
    assert plan["chains"] == [[n3]]
    configs = bed.configs(plan, manifest, PATH, stall_timeout=8, idle_timeout=8, parent_patience=3, wait=2,
                          timeout=5, progress_interval=1)
    configs[n3]["upstreams"].insert(0, {"name": n2, "url": "http://%s:8765" % bed.ip(n2)})
    configs[n2] = dict(configs[n1], name=n2, bind=bed.ip(n2), children=[n3])
    results = bed.finish(bed.start(configs), timeout=90)
    assert results[n3][0] == 0, results[n3]
    rerun = results[n3][1]
    assert rerun["resumed_pieces"] >= held - 1  # the cut piece may be lost, nothing else
    assert rerun["received"] <= manifest["total"] - (held - 1) * (1 << 20)
    # pieces n2 sent that verified are the seed's bytes; from its first bad piece on, only n1 served
    assert rerun["refused"] == [n2] and rerun["sources"].get(n1, 0) > 0
    assert digest(os.path.join(bed.data(n3), "models", "Qwen3-8B")) == digest(source)
    assert not os.path.exists(partial)
