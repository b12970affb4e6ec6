"""A target to point jobs at when trying duetime (and in its tests): it records every call and honours
``Idempotency-Key`` the way the README asks real targets to: a repeated key gets the saved answer.

``POST /demo/target`` answers 200. Query parameters shape the answer: ``status=503`` (answer that
status), ``sleep=2.5`` (take that long; with ``slow_attempt=1`` only on that attempt), ``group=name``
(track how many calls of a group are in flight at once).
``GET /demo/calls`` lists the calls as JSON.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Call:
    path: str
    query: dict[str, str]
    method: str
    headers: dict[str, str]
    body: str
    received_at: float
    status: int = 0
    replayed: bool = False


@dataclass
class Recorder:
    calls: list[Call] = field(default_factory=list)
    saved: dict[str, tuple[int, str]] = field(default_factory=dict)  # idempotency key -> answer
    in_flight: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    max_in_flight: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def keyed(self, key: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.headers.get("idempotency-key") == key]


class _Handler(BaseHTTPRequestHandler):
    server: DemoTargetServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _answer(self, status: int, body: str, extra: dict[str, str] | None = None) -> None:
        data = body.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the caller gave up (its timeout): nothing to do
            self.close_connection = True

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/demo/calls":
            recorder = self.server.recorder
            with recorder.lock:
                calls = [asdict(c) for c in recorder.calls]
            self._answer(200, json.dumps({"calls": calls}))
        else:
            self._answer(404, '{"error": "not found"}')

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace")
        if parts.path != "/demo/target":
            self._answer(404, '{"error": "not found"}')
            return
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        recorder = self.server.recorder
        call = Call(
            parts.path, query, "POST", {k.lower(): v for k, v in self.headers.items()}, body, time.time()
        )
        key = call.headers.get("idempotency-key", "")
        group = query.get("group", "")
        with recorder.lock:
            recorder.calls.append(call)
            saved = recorder.saved.get(key) if key else None
            recorder.in_flight[group] += 1
            recorder.max_in_flight[group] = max(recorder.max_in_flight[group], recorder.in_flight[group])
        try:
            if saved is not None:  # a repeat: return the saved answer, do nothing again
                call.status, call.replayed = saved[0], True
                self._answer(saved[0], saved[1], {"Idempotent-Replayed": "true"})
                return
            slow_attempt = query.get("slow_attempt")
            if slow_attempt is None or slow_attempt == call.headers.get("x-duetime-attempt"):
                time.sleep(float(query.get("sleep", "0")))
            status = int(query.get("status", "200"))
            answer = json.dumps({"ok": 200 <= status < 300, "run": key})
            if 200 <= status < 300 and key:
                with recorder.lock:
                    recorder.saved[key] = (status, answer)
            call.status = status
            self._answer(status, answer)
        finally:
            with recorder.lock:
                recorder.in_flight[group] -= 1


class DemoTargetServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), _Handler)
        self.recorder = Recorder()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/demo/target"

    def start(self) -> DemoTargetServer:
        threading.Thread(target=self.serve_forever, name="demo-target", daemon=True).start()
        return self
