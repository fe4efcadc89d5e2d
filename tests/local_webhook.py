"""A real incoming webhook on a loopback port, for the tests of job_notify (fixture `hook` in conftest.py)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class Hook:
    """A local webhook: answers the queued statuses in turn (then 200) and keeps each JSON body."""

    def __init__(self, statuses=()):
        self.statuses, self.bodies = list(statuses), []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                hook.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(hook.statuses.pop(0) if hook.statuses else 200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/hooks/SECRET-TOKEN-123" % self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
