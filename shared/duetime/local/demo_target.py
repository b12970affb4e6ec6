"""A target to point jobs at when trying duetime (and in its tests): it records every call and honours
``Idempotency-Key`` the way docs/guide/targets.md asks real targets to: a repeated key gets the saved answer.

``POST /demo/target`` answers 200. Query parameters shape the answer: ``status=503`` (answer that
status), ``sleep=2.5`` (take that long; with ``slow_attempt=1`` only on that attempt), ``group=name``
(track how many calls of a group are in flight at once), ``fail_attempt=1`` (answer 503 to that attempt
only). ``GET /demo/calls`` lists the calls as JSON.
``duetime local`` serves it beside the API; ``DemoTargetServer`` serves it alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Answer = tuple[int, str, dict[str, str]]
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


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
    answered_at: float | None = None  # when the target finished with it (the caller may have gone by then)


@dataclass
class DemoTarget:
    calls: list[Call] = field(default_factory=list)
    saved: dict[str, tuple[int, str]] = field(default_factory=dict)  # idempotency key -> answer
    in_flight: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    max_in_flight: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def keyed(self, key: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.headers.get("idempotency-key") == key]

    def handle(self, method: str, target: str, headers: dict[str, str], body: str) -> Answer:
        parts = urlsplit(target)
        if method == "GET" and parts.path == "/demo/calls":
            with self.lock:
                calls = [asdict(c) for c in self.calls]
            return 200, json.dumps({"calls": calls}), {}
        if method != "POST" or parts.path != "/demo/target":
            return 404, '{"error": {"code": "not_found", "message": "no such demo route"}}', {}
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        call = Call(parts.path, query, method, {k.lower(): v for k, v in headers.items()}, body, time.time())
        key = call.headers.get("idempotency-key", "")
        group = query.get("group", "")
        with self.lock:
            self.calls.append(call)
            saved = self.saved.get(key) if key else None
            self.in_flight[group] += 1
            self.max_in_flight[group] = max(self.max_in_flight[group], self.in_flight[group])
        try:
            if saved is not None:  # a repeat: return the saved answer, do nothing again
                call.status, call.replayed = saved[0], True
                return saved[0], saved[1], {"Idempotent-Replayed": "true"}
            slow_attempt = query.get("slow_attempt")
            if slow_attempt is None or slow_attempt == call.headers.get("x-duetime-attempt"):
                time.sleep(float(query.get("sleep", "0")))
            status = int(query.get("status", "200"))
            fail_attempt = query.get("fail_attempt")
            if fail_attempt is not None and fail_attempt == call.headers.get("x-duetime-attempt"):
                status = 503
            answer = json.dumps({"ok": 200 <= status < 300, "run": key})
            if 200 <= status < 300 and key:
                with self.lock:
                    self.saved[key] = (status, answer)
            call.status = status
            return status, answer, {}
        finally:
            with self.lock:
                self.in_flight[group] -= 1
                call.answered_at = time.time()


class JsonRequestHandler(BaseHTTPRequestHandler):
    """Reads a request, asks ``answer`` for (status, body, headers), writes it. Quiet; survives callers
    that hang up (a target call past its timeout)."""

    protocol_version = "HTTP/1.1"
    # The head and the body are two writes: with Nagle's algorithm on, the body waits for the caller's
    # delayed ACK of the head (~40 ms on Linux), so every answer took 40 ms more than it should.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        return

    def answer(self, method: str, body: str) -> Answer:
        raise NotImplementedError

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        extra: dict[str, str] = {}
        if method not in KNOWN_METHODS:
            status, text = 405, '{"error": {"code": "method_not_allowed", "message": "not here"}}'
        else:
            status, text, extra = self.answer(method, body)
        data = b"" if method == "HEAD" else text.encode()
        try:
            self.send_response(status)
            if text and not any(name.lower() == "content-type" for name in extra):
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the caller gave up: nothing to do
            self.close_connection = True

    def __getattr__(self, name: str) -> Any:
        """``do_<METHOD>`` for every method: unknown ones are answered 405, never 501."""
        if name.startswith("do_"):
            return lambda: self._serve(name[3:])
        raise AttributeError(name)


class _DemoHandler(JsonRequestHandler):
    server: DemoTargetServer

    def answer(self, method: str, body: str) -> Answer:
        return self.server.recorder.handle(method, self.path, dict(self.headers.items()), body)


class DemoTargetServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), _DemoHandler)
        self.recorder = DemoTarget()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/demo/target"

    def start(self) -> DemoTargetServer:
        threading.Thread(target=self.serve_forever, name="demo-target", daemon=True).start()
        return self


@contextmanager
def demo_target_process() -> Iterator[str]:
    """A demo target in a process of its own, for benchmarks whose CPU figures must be duetime's alone
    (a target answering in the bench's own process would add its CPU to theirs); yields its URL."""
    child = subprocess.Popen(
        [sys.executable, "-m", "duetime.local.demo_target"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        yield child.stdout.readline().strip()
    finally:
        child.terminate()
        child.wait(timeout=10)


if __name__ == "__main__":  # python -m duetime.local.demo_target: serve on a free port, print the URL
    server = DemoTargetServer()
    print(server.url, flush=True)
    server.serve_forever()
