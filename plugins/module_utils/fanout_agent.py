# Spreading one artifact (a directory or a file) node to node: a piece server and a verifying, resumable puller.
#
# - The seed describes the artifact in a manifest: its files (relative path, size, mode) and the SHA-256 of every
#   fixed-size piece of their concatenation. The manifest's id is the SHA-256 of that description.
# - Every node serves, over HTTP bound to its fleet address with a bearer token, the pieces it holds and has
#   verified (GET /piece/<i>?wait=<s> waits for a piece not there yet, so a node forwards while it receives).
# - A puller fetches the pieces it lacks from its upstreams (parent first, then further up its chain, the seed
#   last), checks each against the manifest before it is written or served, and never uses again an upstream
#   that sent a piece that does not verify. It writes into <dest>.fanout-partial/ and records what it holds in
#   state.json there; a rerun re-checks those pieces and fetches only the rest. Complete, it moves the partial
#   directory into place (an existing <dest> is moved aside first, never deleted) and tells its upstreams.
# - A server stops when it is complete and all its children said they are done, after idle_timeout seconds
#   without a request (pullers send a heartbeat to every upstream they may fall back to), or at the deadline.
#
# Standard library only, Python 3.8+, so that it runs on a node as a module's helper and as a plain script:
#   python3 fanout_agent.py manifest SRC [--piece-size N] > manifest.json
#   python3 fanout_agent.py run CONFIG.json
from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


def make_handler(store, token):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet; progress is reported by the agent
            pass

        def _send(self, status, body=b"", kind="application/octet-stream"):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)

        def _authorised(self):
            given = self.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), ("Bearer " + token).encode()):
                self._send(401, b"token required\n", "text/plain")
                return False
            return True

        def do_GET(self):  # noqa: N802 (http.server's name)
            if not self._authorised():
                return
            store.last_request = time.time()
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            if url.path == "/manifest":
                return self._send(200, json.dumps(store.manifest).encode(), "application/json")
            if url.path == "/have":
                return self._send(200, json.dumps({"have": store.count(), "pieces": store.layout.count}).encode(),
                                  "application/json")
            if url.path.startswith("/piece/"):
                try:
                    index = int(url.path.rsplit("/", 1)[1])
                    wait = min(float(query.get("wait", ["0"])[0]), 30.0)
                except ValueError:
                    return self._send(400, b"bad piece\n", "text/plain")
                if not 0 <= index < store.layout.count:
                    return self._send(416, b"no such piece\n", "text/plain")
                data = store.get(index, wait)
                if data is None:
                    return self._send(404, b"not yet\n", "text/plain")
                store.served_bytes += len(data)
                store.last_request = time.time()
                return self._send(200, data)
            return self._send(404, b"unknown\n", "text/plain")

        def do_POST(self):  # noqa: N802
            if not self._authorised():
                return
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/done":
                node = urllib.parse.parse_qs(url.query).get("node", ["?"])[0]
                with store.cond:
                    store.children_done.add(node)
                    store.cond.notify_all()
                return self._send(200, b"ok\n", "text/plain")
            return self._send(404, b"unknown\n", "text/plain")

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a peer that hung up (a refused upstream, a cut link): the puller retries, nothing to report here


def serve(store, address, port, token):
    """Start the server thread; returns the server (server.server_address has the port)."""
    server = _Server((address, port), make_handler(store, token))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


# ---------------------------------------------------------------- puller
class Upstream:
    def __init__(self, name, url, token, timeout):
        self.name = name
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname, parts.port or 80
        self.token = token
        self.timeout = timeout
        self.conn = None
        self.refused = False  # sent a piece that did not verify: never used again
        self.down_until = 0.0
        self.received = 0

    def request(self, method, path, wait=0.0):
        for attempt in (1, 2):  # one reconnect on a dropped keep-alive connection
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout + wait)
            try:
                self.conn.request(method, path, headers={"Authorization": "Bearer " + self.token})
                response = self.conn.getresponse()
                return response.status, response.read()
            except (OSError, http.client.HTTPException):
                self.close()
                if attempt == 2:
                    raise

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class Heartbeat:
    """Keeps a puller's fallback upstreams from stopping on idle while it pulls from a nearer one: a GET /have to
    every upstream not refused, every `interval` seconds, on connections of its own (short timeouts)."""

    def __init__(self, upstreams, interval):
        self.upstreams, self.interval = upstreams, interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.wait(self.interval):
            for upstream in self.upstreams:
                if upstream.refused or self.stop.is_set():
                    continue
                conn = http.client.HTTPConnection(upstream.host, upstream.port, timeout=3)
                try:
                    conn.request("GET", "/have", headers={"Authorization": "Bearer " + upstream.token})
                    conn.getresponse().read()
                except (OSError, http.client.HTTPException):
                    pass
                finally:
                    conn.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()


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


class Progress:
    """One line (and one JSON record) at least every `interval` seconds."""

    def __init__(self, name, store, interval, path=None, emit=None):
        self.name, self.store, self.interval, self.path = name, store, interval, path
        self.emit = emit or (lambda line: print(line, file=sys.stderr, flush=True))
        self.start = self.last = time.time()
        self.last_bytes = 0

    def record(self, upstream=None, final=False):
        now = time.time()
        got = self.store.received_bytes
        rate = (got - self.last_bytes) / max(now - self.last, 1e-6)
        self.last, self.last_bytes = now, got
        have = self.store.count()
        layout = self.store.layout
        held = min(layout.total, have * layout.piece_size)
        rec = {"node": self.name, "pieces": have, "of": layout.count, "bytes": held, "total": layout.total,
               "received": got, "served": self.store.served_bytes, "rate": round(rate),
               "elapsed": round(now - self.start, 1), "upstream": upstream, "final": final}
        if self.path:
            with open(self.path + ".tmp", "w", encoding="utf-8") as handle:
                json.dump(rec, handle)
            os.replace(self.path + ".tmp", self.path)
        self.emit("fanout %s: %d/%d pieces, %.1f/%.1f MB, %.1f MB/s from %s, served %.1f MB, %.0f s" % (
            self.name, have, layout.count, held / 1e6, layout.total / 1e6, rate / 1e6, upstream or "-",
            self.store.served_bytes / 1e6, now - self.start))
        return rec

    def tick(self, upstream=None):
        if time.time() - self.last >= self.interval:
            self.record(upstream)


def pull(store, partial, upstreams, deadline, progress, stall_timeout=120.0, wait=5.0, parent_patience=15.0):
    """Fetch every missing piece; returns {refused: [upstream names], sources: {name: bytes}}.
    Raises FanoutError when no upstream has given a piece for stall_timeout seconds, or at the deadline."""
    manifest = store.manifest
    refused = []
    last_gain = time.time()
    last_save = time.time()
    index = 0
    current = None
    parent_since = None  # since when the parent has not had the piece asked for
    try:
        while not store.complete():
            now = time.time()
            if now > deadline:
                raise FanoutError("fanout %s: deadline reached with %d of %d pieces" % (
                    progress.name, store.count(), store.layout.count))
            if now - last_gain > stall_timeout:
                raise FanoutError("fanout %s: no upstream gave a piece for %d s (%s); rerun to resume with %d of %d "
                                  "pieces" % (progress.name, stall_timeout, ", ".join(
                                      "%s%s" % (u.name, " refused" if u.refused else "") for u in upstreams),
                                      store.count(), store.layout.count))
            while store.have[index]:
                index = (index + 1) % store.layout.count
            got = False
            for upstream in upstreams:
                if upstream.refused or upstream.down_until > time.time():
                    continue
                try:
                    status, body = upstream.request("GET", "/piece/%d?wait=%s" % (index, wait), wait=wait)
                except (OSError, http.client.HTTPException):
                    upstream.down_until = time.time() + 5.0
                    continue
                if status == 200:
                    if piece_ok(manifest, index, body):
                        store.put(index, body)
                        if upstream is upstreams[0]:
                            parent_since = None
                        upstream.received += len(body)
                        current, got, last_gain = upstream.name, True, time.time()
                        break
                    upstream.refused = True
                    upstream.close()
                    refused.append(upstream.name)
                    progress.emit("fanout %s: piece %d from %s does not match the manifest; %s is not used again"
                                  % (progress.name, index, upstream.name, upstream.name))
                    continue
                if status == 401:
                    upstream.down_until = time.time() + 30.0
                    progress.emit("fanout %s: %s refused the token" % (progress.name, upstream.name))
                    continue
                if status == 404 and upstream is upstreams[0]:
                    if parent_since is None:
                        parent_since = time.time()
                    if time.time() - parent_since < parent_patience:
                        break  # the parent is still receiving it; ask it again rather than load the seed
                    continue  # the parent is stuck behind a lost link of its own: go further up the chain
            if not got:
                if all(u.refused for u in upstreams):
                    raise FanoutError("fanout %s: every upstream sent pieces that do not verify (%s)" % (
                        progress.name, ", ".join(u.name for u in upstreams)))
                time.sleep(0.2)
            if time.time() - last_save > 2.0:
                save_state(partial, manifest, store)
                last_save = time.time()
            progress.tick(current)
    finally:
        save_state(partial, manifest, store)  # a cut run keeps every piece it verified
    return {"refused": refused, "sources": {u.name: u.received for u in upstreams if u.received}}


def fsync_tree(root):
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def default_aside(path, reason):
    target = "%s.%s-%s" % (path, reason, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    number = 1
    while os.path.lexists(target):
        target = "%s.%s-%s.%d" % (path, reason, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), number)
        number += 1
    os.rename(path, target)
    return target


def run(config, aside=default_aside, emit=None):
    """One node's part. config keys:
    name, manifest (dict), token, bind (address), port (0 = any; the chosen port is written to port_file),
    port_file, role ('seed' or 'pull'), src (seed: the complete artifact), dest (puller: the final path),
    upstreams ([{name, url}]), children ([names]), progress_file, progress_interval (30), idle_timeout (120; a
    puller's heartbeat, every `heartbeat` s (5), keeps its fallback upstreams from idling out),
    deadline (seconds, 86400), stall_timeout (120), serve (bool, default True).
    Returns a result dict."""
    manifest = config["manifest"]
    name = config["name"]
    deadline = time.time() + float(config.get("deadline", 86400))
    result = {"name": name, "role": config["role"], "manifest": manifest["id"], "moved_aside": None,
              "refused": [], "sources": {}, "resumed_pieces": 0}
    if config["role"] == "seed":
        root = config["src"]
        store = Store(root, manifest, complete=True)
    else:
        dest = config["dest"].rstrip("/")
        partial = dest + PARTIAL_SUFFIX
        root = os.path.join(partial, "data")
        os.makedirs(partial, exist_ok=True)
        store = Store(root, manifest)
        store.layout.create()
        for index in load_state(partial, manifest):  # a rerun: keep what still verifies
            if 0 <= index < store.layout.count and piece_ok(manifest, index, store.layout.read(index)):
                store.have[index] = True
        result["resumed_pieces"] = store.count()
    progress = Progress(name, store, float(config.get("progress_interval", 30)), config.get("progress_file"), emit)
    server = None
    if config.get("serve", True) and (config.get("children") or config["role"] == "seed"):
        server = serve(store, config["bind"], int(config.get("port", 0)), config["token"])
        if config.get("port_file"):
            with open(config["port_file"], "w", encoding="utf-8") as handle:
                handle.write(str(server.server_address[1]))
        result["port"] = server.server_address[1]
    try:
        if config["role"] == "pull":
            upstreams = [Upstream(u["name"], u["url"], config["token"], float(config.get("timeout", 30)))
                         for u in config["upstreams"]]
            with Heartbeat(upstreams, float(config.get("heartbeat", 5))):
                outcome = pull(store, partial, upstreams, deadline, progress,
                               stall_timeout=float(config.get("stall_timeout", 120)),
                               wait=float(config.get("wait", 5)),
                               parent_patience=float(config.get("parent_patience", 15)))
            result.update(outcome)
            progress.record(final=True)
            fsync_tree(root)
            if os.path.lexists(dest):
                result["moved_aside"] = aside(dest, "replaced")
            os.rename(root, dest)
            store.layout.root = dest
            os.remove(os.path.join(partial, STATE))
            os.rmdir(partial)
            for upstream in upstreams:
                if not upstream.refused:
                    try:
                        upstream.request("POST", "/done?node=" + urllib.parse.quote(name))
                    except (OSError, http.client.HTTPException):
                        pass
                upstream.close()
        if server is not None:
            children = set(config.get("children") or [])
            idle = float(config.get("idle_timeout", 120))
            while time.time() < deadline:
                with store.cond:
                    if children <= store.children_done:
                        break
                    store.cond.wait(1.0)
                if time.time() - store.last_request > idle:
                    result["idle_stop"] = True
                    break
                progress.tick("serving")
            result["children_done"] = sorted(store.children_done)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    result["served"] = store.served_bytes
    result["received"] = store.received_bytes
    result["elapsed"] = round(time.time() - progress.start, 2)
    return result


def main(argv):
    if len(argv) >= 2 and argv[0] == "manifest":
        size = int(argv[3]) if len(argv) >= 4 and argv[2] == "--piece-size" else PIECE_SIZE
        json.dump(build_manifest(argv[1], size), sys.stdout)
        return 0
    if len(argv) == 2 and argv[0] == "run":
        with open(argv[1], encoding="utf-8") as handle:
            config = json.load(handle)
        try:
            result = run(config)
        except FanoutError as exc:
            print(json.dumps({"failed": True, "msg": str(exc)}))
            return 1
        print(json.dumps(result))
        return 0
    print("usage: fanout_agent.py manifest SRC [--piece-size N] | run CONFIG.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    socket.setdefaulttimeout(60)
    sys.exit(main(sys.argv[1:]))
