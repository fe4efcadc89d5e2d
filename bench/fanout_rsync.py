"""The store-and-forward alternative of bench/fanout.py: rsync daemons on the same node containers and links.

rsync is not in the node-base test image, so `image()` layers Debian's rsync (and the libraries of its Depends that
node-base lacks) on it, from packages the host's apt downloads (`apt-get download`, `dpkg-deb -x`; the container
gets no network), tagged mtslime-bench/fanout-rsync:<node-base id12> and reused while node-base is the same.

A node can send only a complete copy (rsync of a growing file is a torn file), so each node starts when its
parent has finished. Shapes (`schedule`):
  chain     seed -> 1 -> 2 -> ... (N copies' time)
  tree      a binary tree: every node, once complete, sends to its two children at once (its uplink split two ways)
  doubling  every node that holds a copy sends to one new node per round (1, 2, 4, 8 holders: the best
            store-and-forward schedule, ceil(log2(N + 1)) copies' time)
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time

BASE = "mtslime-test/node-base:current"
REPO_TAG = "mtslime-bench/fanout-rsync"
PORT = 8873
CONF = """port = %d
use chroot = no
[data]
    path = /data
    read only = yes
"""


def _run(*argv, **kwargs):
    result = subprocess.run(list(argv), text=True, capture_output=True, **kwargs, check=False)
    if result.returncode:
        raise SystemExit("bench: %s failed: %s" % (" ".join(argv[:3]), result.stderr.strip()[-500:]))
    return result


def image(base=BASE):
    """The tag of node-base + rsync, built when missing."""
    base_id = _run("docker", "image", "inspect", "-f", "{{.Id}}", base).stdout.strip().split(":")[-1]
    tag = "%s:%s" % (REPO_TAG, base_id[:12])
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False).returncode == 0:
        return tag
    depends = [line.split(":", 1)[1].strip().strip("<>") for line in
               _run("apt-cache", "depends", "--important", "rsync").stdout.splitlines() if ":" in line]
    query = subprocess.run(["docker", "run", "--rm", "--network", "none", base, "dpkg-query", "-W",
                            "-f", "${Package} ${db:Status-Status}\\n"] + depends, text=True, capture_output=True,
                           check=False)
    have = {line.split()[0] for line in query.stdout.splitlines() if line.endswith(" installed")}
    wanted = ["rsync"] + [name for name in depends if name not in have]
    work = tempfile.mkdtemp(prefix="mtslime-fanout-rsync-")
    cid = None
    try:
        fetched = subprocess.run(["apt-get", "download"] + wanted, cwd=work, text=True, capture_output=True,
                                 check=False)
        if fetched.returncode:
            raise SystemExit("bench: apt-get download %s failed (run apt-get update first?): %s" % (
                " ".join(wanted), fetched.stderr.strip()[-300:]))
        root = os.path.join(work, "root")
        for deb in sorted(f for f in os.listdir(work) if f.endswith(".deb")):
            _run("dpkg-deb", "-x", os.path.join(work, deb), root)
        for top in ("bin", "sbin", "lib", "lib64"):  # node-base has a merged /usr: /lib is a link to usr/lib
            if os.path.isdir(os.path.join(root, top)) and not os.path.islink(os.path.join(root, top)):
                _run("cp", "-a", os.path.join(root, top) + "/.", os.path.join(root, "usr", top) + "/")
                shutil.rmtree(os.path.join(root, top))
        cid = _run("docker", "create", "--network", "none", base, "sleep", "infinity").stdout.strip()
        _run("docker", "cp", root + "/.", cid + ":/")
        _run("docker", "commit", "--change", "LABEL org.mtslime.bench=fanout-rsync org.mtslime.base=" + base_id[:12],
             cid, tag)
    finally:
        if cid:
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)
    _run("docker", "run", "--rm", "--network", "none", tag, "rsync", "--version")
    print("bench: built %s (node-base + %s)" % (tag, ", ".join(wanted)), flush=True)
    return tag


def start_daemons(bed):
    """An rsync daemon on every node, serving /data read-only on its fleet address."""
    for name in bed.names:
        with open(os.path.join(bed.data(name), "rsyncd.conf"), "w", encoding="utf-8") as handle:
            handle.write(CONF % PORT)
        _run("docker", "exec", name, "rsync", "--daemon", "--config=/data/rsyncd.conf", "--address=" + bed.ip(name))


def parents(count, shape):
    """{node index (1..count): (parent index, index of the sibling the parent serves before it, or None)};
    0 is the seed."""
    if shape == "chain":
        return {k: (k - 1, None) for k in range(1, count + 1)}
    if shape == "tree":
        return {k: ((k - 1) // 2, None) for k in range(1, count + 1)}
    if shape == "doubling":  # in round r (1, 2, ...) holder j < 2^(r-1) sends to j + 2^(r-1)
        result, last_child = {}, {}
        for k in range(1, count + 1):
            parent = k - (1 << (k.bit_length() - 1))
            result[k] = (parent, last_child.get(parent))
            last_child[parent] = k
        return result
    raise ValueError(shape)


def spread(bed, seed, nodes, src, dest, shape):
    """Every node of `nodes` gets `src` (a directory on the seed, under /data) by rsync from its parent in `shape`;
    returns (seconds until the last node is complete, {node: seconds})."""
    order = [seed] + list(nodes)
    for name in nodes:
        _run("docker", "exec", name, "rm", "-rf", dest)
    done = {0: threading.Event()}
    done[0].set()
    finished, errors = {}, []
    plan = parents(len(nodes), shape)
    for k in plan:
        done[k] = threading.Event()
    start = time.time()

    def pull(k):
        parent, after = plan[k]
        done[parent].wait()
        if after is not None:
            done[after].wait()
        source = src if parent == 0 else dest
        url = "rsync://%s:%d/data/%s/" % (bed.ip(order[parent]), PORT, source[len("/data/"):].strip("/"))
        result = subprocess.run(["docker", "exec", order[k], "rsync", "-a", "--whole-file", "--mkpath", url,
                                 dest + "/"], capture_output=True, text=True, check=False)
        if result.returncode:
            errors.append("%s: %s" % (order[k], result.stderr.strip()[-300:]))
        finished[order[k]] = time.time() - start
        done[k].set()

    threads = [threading.Thread(target=pull, args=(k,), daemon=True) for k in plan]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit("bench: rsync failed: " + "; ".join(errors))
    return max(finished.values()), finished
