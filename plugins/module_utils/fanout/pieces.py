# The pieces of an artifact (a directory or a file) that mtslime.posttrain spreads over a fleet (agent.py):
# its manifest (the files, their sizes and modes, the SHA-256 of every fixed-size piece of their concatenation; the
# id is the SHA-256 of that description), the map from a piece to byte ranges of the files, the verified pieces a
# node holds, and the record of a cut pull (state.json in <dest>.fanout-partial/).
#
# Standard library only, Python 3.8+ (it runs on nodes, and beside agent.py as a plain script).
from __future__ import annotations

import hashlib
import json
import os
import threading
import time

PIECE_SIZE = 4 << 20
PARTIAL_SUFFIX = ".fanout-partial"
STATE = "state.json"
MANIFEST_VERSION = 1


class FanoutError(Exception):
    pass


# ---------------------------------------------------------------- manifest
def _walk(src):
    if os.path.isfile(src):
        return [("", os.path.getsize(src), os.stat(src).st_mode & 0o777)]
    entries = []
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            if os.path.islink(path):
                raise FanoutError("fanout: %s is a symbolic link; spread a directory of plain files" % path)
            entries.append((rel, os.path.getsize(path), os.stat(path).st_mode & 0o777))
    return entries


def describe(files, piece_size, pieces):
    body = {"version": MANIFEST_VERSION, "piece_size": piece_size,
            "files": [{"path": p, "size": s, "mode": m} for p, s, m in files], "pieces": pieces}
    body["total"] = sum(f["size"] for f in body["files"])
    text = json.dumps({k: body[k] for k in ("version", "piece_size", "files", "pieces")}, sort_keys=True)
    body["id"] = hashlib.sha256(text.encode()).hexdigest()
    return body


def build_manifest(src, piece_size=PIECE_SIZE):
    """The manifest of the file or directory `src` (reads it once)."""
    if not os.path.exists(src):
        raise FanoutError("fanout: the source %s does not exist" % src)
    files = _walk(src)
    layout = Layout(src, {"files": [{"path": p, "size": s} for p, s, _m in files], "piece_size": piece_size})
    pieces = [hashlib.sha256(layout.read(i)).hexdigest() for i in range(layout.count)]
    return describe(files, piece_size, pieces)


class Layout:
    """Maps piece i to byte ranges of the artifact's files under `root`."""

    def __init__(self, root, manifest):
        self.root = root
        self.piece_size = int(manifest["piece_size"])
        self.files = manifest["files"]
        self.total = sum(int(f["size"]) for f in self.files)
        self.count = (self.total + self.piece_size - 1) // self.piece_size
        self.starts = []
        offset = 0
        for entry in self.files:
            self.starts.append(offset)
            offset += int(entry["size"])

    def path(self, entry):
        return os.path.join(self.root, entry["path"]) if entry["path"] else self.root

    def length(self, index):
        return min(self.piece_size, self.total - index * self.piece_size)

    def spans(self, index):
        """[(file entry, offset in file, length)] covering piece `index`."""
        begin = index * self.piece_size
        end = begin + self.length(index)
        result = []
        for entry, start in zip(self.files, self.starts):
            stop = start + int(entry["size"])
            if stop <= begin or start >= end:
                continue
            lo, hi = max(begin, start), min(end, stop)
            result.append((entry, lo - start, hi - lo))
        return result

    def read(self, index):
        parts = []
        for entry, offset, length in self.spans(index):
            with open(self.path(entry), "rb") as handle:
                handle.seek(offset)
                parts.append(handle.read(length))
        return b"".join(parts)

    def write(self, index, data):
        position = 0
        for entry, offset, length in self.spans(index):
            with open(self.path(entry), "r+b") as handle:
                handle.seek(offset)
                handle.write(data[position:position + length])
            position += length

    def create(self):
        """Files of the right sizes (sparse), directories included; existing files are kept."""
        if self.files and self.files[0]["path"] == "":
            parent = os.path.dirname(self.root)
            os.makedirs(parent or ".", exist_ok=True)
        for entry in self.files:
            path = self.path(entry)
            if entry["path"]:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "ab") as handle:
                if handle.tell() != int(entry["size"]):
                    handle.truncate(int(entry["size"]))


def piece_ok(manifest, index, data):
    return hashlib.sha256(data).hexdigest() == manifest["pieces"][index]


# ---------------------------------------------------------------- node state
class Store:
    """The pieces this node holds (verified), with a condition to wait on."""

    def __init__(self, root, manifest, complete=False):
        self.manifest = manifest
        self.layout = Layout(root, manifest)
        self.have = [complete] * self.layout.count
        self.cond = threading.Condition()
        self.children_done = set()
        self.last_request = time.time()
        self.served_bytes = 0
        self.received_bytes = 0

    def count(self):
        return sum(self.have)

    def complete(self):
        return all(self.have)

    def put(self, index, data):
        self.layout.write(index, data)
        with self.cond:
            self.have[index] = True
            self.received_bytes += len(data)
            self.cond.notify_all()

    def get(self, index, wait):
        deadline = time.time() + wait
        with self.cond:
            while not self.have[index]:
                left = deadline - time.time()
                if left <= 0:
                    return None
                self.cond.wait(left)
        return self.layout.read(index)


def load_state(partial, manifest):
    try:
        with open(os.path.join(partial, STATE), encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return []
    if state.get("manifest") != manifest["id"]:
        return []
    return [int(i) for i in state.get("have", [])]


def save_state(partial, manifest, store):
    path = os.path.join(partial, STATE)
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump({"manifest": manifest["id"], "have": [i for i, h in enumerate(store.have) if h]}, handle)
    os.replace(path + ".tmp", path)
