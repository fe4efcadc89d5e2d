# Spreading one artifact (a directory or a file) node to node: a piece server and a verifying, resumable puller.
#
# - The seed describes the artifact in a manifest (pieces.py): its files and the SHA-256 of every fixed-size
#   piece of their concatenation.
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
#   python3 agent.py manifest SRC [--piece-size N] > manifest.json    (pieces.py beside it)
#   python3 agent.py run CONFIG.json
from __future__ import annotations
# pylint: disable=ansible-bad-function  # also a program (python3 FILE, outside any module): prints, exits

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
from typing import Dict, List

# pylint: disable=unused-import  # Layout and describe: re-exported for the tests
try:  # as a collection module_utils (the fanout module) ...
    from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout.pieces import (  # noqa: F401
        PARTIAL_SUFFIX, PIECE_SIZE, STATE, FanoutError, Layout, Store, build_manifest, describe, load_state,
        piece_ok, save_state)
except ImportError:  # ... or as a plain script next to pieces.py
    from pieces import (  # noqa: F401
        PARTIAL_SUFFIX, PIECE_SIZE, STATE, FanoutError, Layout, Store, build_manifest, describe, load_state,
        piece_ok, save_state)
# pylint: enable=unused-import


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

    def __init__(self, upstreams, interval, refused=()):
        self.upstreams, self.interval, self.refused = upstreams, interval, refused
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.wait(self.interval):
            for upstream in self.upstreams:
                if upstream.name in self.refused or self.stop.is_set():
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


class _PullState:
    """What the streams of one puller share: claimed pieces, refused upstreams, the last gain, the first error."""

    def __init__(self):
        self.lock = threading.Lock()
        self.claimed = set()
        self.refused = []
        self.last_gain = time.time()
        self.current = None
        self.error = None
        self.stop = threading.Event()

    def claim(self, store):
        with self.lock:
            for index, held in enumerate(store.have):
                if not held and index not in self.claimed:
                    self.claimed.add(index)
                    return index
        return None

    def release(self, index):
        with self.lock:
            self.claimed.discard(index)


def _fetch(store, state, upstreams, index, wait, parent_patience, progress, parent_since):
    """Try to get piece `index` from the upstreams, nearest first. Returns (got, parent_since)."""
    manifest = store.manifest
    for upstream in upstreams:
        parent = upstream is upstreams[0]
        if upstream.name in state.refused:
            continue
        if upstream.down_until > time.time():
            if parent and parent_since and time.time() - parent_since < parent_patience:
                return False, parent_since  # a parent starting up or briefly away: wait for it a while
            continue
        try:
            status, body = upstream.request("GET", "/piece/%d?wait=%s" % (index, wait), wait=wait)
        except (OSError, http.client.HTTPException):
            upstream.down_until = time.time() + (1.0 if parent else 5.0)
            if parent:
                parent_since = parent_since or time.time()
                if time.time() - parent_since < parent_patience:
                    return False, parent_since
            continue
        if status == 200:
            if piece_ok(manifest, index, body):
                store.put(index, body)
                upstream.received += len(body)
                with state.lock:
                    state.current, state.last_gain = upstream.name, time.time()
                return True, None if parent else parent_since
            upstream.close()
            with state.lock:
                if upstream.name not in state.refused:
                    state.refused.append(upstream.name)
                    progress.emit("fanout %s: piece %d from %s does not match the manifest; %s is not used again"
                                  % (progress.name, index, upstream.name, upstream.name))
            continue
        if status == 401:
            upstream.down_until = time.time() + 30.0
            progress.emit("fanout %s: %s refused the token" % (progress.name, upstream.name))
            continue
        if status == 404 and parent:
            parent_since = parent_since or time.time()
            if time.time() - parent_since < parent_patience:
                return False, parent_since  # the parent is still receiving it: ask it again, not the seed
            continue  # the parent is stuck behind a lost link of its own: go further up the chain
    return False, parent_since


def _stream(store, state, upstreams, wait, parent_patience, progress):
    parent_since = None  # since when the parent has not had a piece asked for
    while not state.stop.is_set() and not store.complete():
        index = state.claim(store)
        if index is None:  # every missing piece is being fetched by another stream
            time.sleep(0.05)
            continue
        try:
            got, parent_since = _fetch(store, state, upstreams, index, wait, parent_patience, progress,
                                       parent_since)
        finally:
            state.release(index)
        if not got:
            time.sleep(0.2)
    for upstream in upstreams:
        upstream.close()


def pull(store, partial, upstreams, deadline, progress, stall_timeout=120.0, wait=5.0, parent_patience=15.0,
         streams=2, refused=None):
    """Fetch every missing piece with `streams` parallel connections per upstream (so that a request's round trip
    never leaves the link idle); returns {refused: [upstream names], sources: {name: bytes}}.
    Raises FanoutError when no upstream has given a piece for stall_timeout seconds, or at the deadline."""
    manifest = store.manifest
    state = _PullState()
    if refused is not None:
        state.refused = refused  # shared with the heartbeat, which then spares them
    lanes = [upstreams] + [[Upstream(u.name, "http://%s:%d" % (u.host, u.port), u.token, u.timeout)
                            for u in upstreams] for dummy in range(max(1, streams) - 1)]
    threads = [threading.Thread(target=_stream, args=(store, state, lane, wait, parent_patience, progress),
                                daemon=True) for lane in lanes]
    for thread in threads:
        thread.start()
    last_save = time.time()
    try:
        while not store.complete():
            now = time.time()
            if now > deadline:
                raise FanoutError("fanout %s: deadline reached with %d of %d pieces" % (
                    progress.name, store.count(), store.layout.count))
            if now - state.last_gain > stall_timeout:
                raise FanoutError("fanout %s: no upstream gave a piece for %d s (%s); rerun to resume with %d of %d "
                                  "pieces" % (progress.name, stall_timeout, ", ".join(
                                      "%s%s" % (u.name, " refused" if u.name in state.refused else "")
                                      for u in upstreams), store.count(), store.layout.count))
            if len(state.refused) == len({u.name for u in upstreams}):
                raise FanoutError("fanout %s: every upstream sent pieces that do not verify (%s)" % (
                    progress.name, ", ".join(u.name for u in upstreams)))
            with store.cond:
                store.cond.wait(0.5)
            if time.time() - last_save > 2.0:
                save_state(partial, manifest, store)
                last_save = time.time()
            progress.tick(state.current)
    finally:
        state.stop.set()
        for thread in threads:
            thread.join(float(wait) + 10)
        save_state(partial, manifest, store)  # a cut run keeps every piece it verified
    received: Dict[str, int] = {}
    for lane in lanes:
        for upstream in lane:
            if upstream.received:
                received[upstream.name] = received.get(upstream.name, 0) + upstream.received
    return {"refused": list(state.refused), "sources": received}


def fsync_tree(root):
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def default_aside(path, reason):
    """<path>.<reason>-<UTC time> (module_utils/artifacts/aside.py's naming; the module passes aside.move_aside
    itself)."""
    target = base = "%s.%s-%s" % (path, reason, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    number = 0
    while os.path.lexists(target):
        number += 1
        target = "%s.%d" % (base, number)
    os.rename(path, target)
    return target


def run(config, aside=default_aside, emit=None):
    """One node's part. config keys:
    name, manifest (dict), token, bind (address), port (0 = any; the result says which), role ('seed' or
    'pull'), src (seed: the complete artifact), dest (puller: the final path), upstreams ([{name, url}]),
    children ([names]), progress_file, progress_interval (30), idle_timeout (120; a puller's heartbeat, every
    `heartbeat` s (5), keeps its fallback upstreams from idling out), deadline (86400 s), stall_timeout (120 s),
    timeout (30 s per request), wait (5 s long poll), parent_patience (15 s), streams (2), serve (default true).
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
        result["port"] = server.server_address[1]
    try:
        if config["role"] == "pull":
            upstreams = [Upstream(u["name"], u["url"], config["token"], float(config.get("timeout", 30)))
                         for u in config["upstreams"]]
            refused: List[str] = []
            with Heartbeat(upstreams, float(config.get("heartbeat", 5)), refused):
                outcome = pull(store, partial, upstreams, deadline, progress,
                               stall_timeout=float(config.get("stall_timeout", 120)),
                               wait=float(config.get("wait", 5)),
                               parent_patience=float(config.get("parent_patience", 15)),
                               streams=int(config.get("streams", 2)), refused=refused)
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
                if upstream.name not in result["refused"]:
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
    print("usage: agent.py manifest SRC [--piece-size N] | run CONFIG.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    socket.setdefaulttimeout(60)
    sys.exit(main(sys.argv[1:]))
