"""One Lambda runtime process and the Lambda Runtime API server it polls.

Nothing here imports LocalStack: a :class:`Sandbox` is a process started with ``AWS_LAMBDA_RUNTIME_API``
pointing at a small ``ThreadingHTTPServer`` of its own that serves the runtime side of AWS's Runtime API
(``/2018-06-01/runtime/...``), and :meth:`Sandbox.invoke` hands it one event and waits for the answer, the
timeout or the process's death, whichever comes first. A sandbox is used until its process dies (a timeout
kills it); the executor then starts a new one, as Lambda starts a new sandbox.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import queue
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

LOG = logging.getLogger(__name__)

API_PREFIX = "/2018-06-01/runtime"
MAX_RESPONSE_BYTES = 6_291_556  # AWS's synchronous response limit (6 MB), as LocalStack's Docker init
CAPTURE_LIMIT = 8 * 1024 * 1024  # output kept between two takes; older bytes are dropped

Kind = Literal["response", "error"]


@dataclass
class Invocation:
    request_id: str
    payload: bytes
    function_arn: str
    trace_id: str
    deadline_ms: int
    kind: Kind | None = None
    body: bytes = b""
    error_type: str | None = None


@dataclass
class Outcome:
    """How an invocation ended: ``response``/``error`` (from the runtime), ``timeout``, ``exit`` (the
    process died first) or ``stopped`` (the sandbox was closed under it)."""

    kind: Literal["response", "error", "timeout", "exit", "stopped"]
    body: bytes = b""
    error_type: str | None = None
    exit_status: int | None = None


@dataclass
class InitResult:
    kind: Literal["ready", "init_error", "exit", "timeout", "stopped"]
    seconds: float
    body: bytes = b""
    error_type: str | None = None
    exit_status: int | None = None


# --- starting processes that die with LocalStack ----------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with(parent_pid: int) -> Callable[[], None]:
    def preexec() -> None:  # runs in the child between fork and exec: nothing but two syscalls
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl: nobody would signal us
            os._exit(1)

    return preexec


class _Spawner:
    """Starts every runtime process from one thread that lives as long as LocalStack.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child ends, not the process: a process
    forked from one of LocalStack's request or pool threads would be killed when that thread finishes.
    """

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[dict[str, object], Future[subprocess.Popen[bytes]]]] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._run, name="lambda-process-spawner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            kwargs, future = self._requests.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(subprocess.Popen(preexec_fn=_die_with(os.getpid()), **kwargs))  # type: ignore[call-overload]
            except BaseException as e:
                future.set_exception(e)

    def popen(self, **kwargs: object) -> subprocess.Popen[bytes]:
        future: Future[subprocess.Popen[bytes]] = Future()
        self._requests.put((kwargs, future))
        return future.result()


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def spawn(**kwargs: object) -> subprocess.Popen[bytes]:
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = _Spawner()
    return _spawner.popen(**kwargs)


# --- the process's output ---------------------------------------------------------------------------------


class OutputCapture:
    """Reads a pipe in a thread and hands out what arrived since the last :meth:`take`.

    :meth:`take` also reads what is still in the pipe, under the same lock as the thread: output the runtime
    wrote before it posted a response is in the pipe by then, so it is never missed nor taken twice.
    """

    def __init__(self, fd: int, name: str) -> None:
        self._fd = fd
        os.set_blocking(fd, False)
        self._lock = threading.Lock()
        self._buffer = bytearray()
        self._eof = False
        self._thread = threading.Thread(target=self._run, name=f"{name}-output", daemon=True)
        self._thread.start()

    def _read_available(self) -> None:  # with the lock held
        while not self._eof:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._eof = True
                return
            self._buffer += data
            if len(self._buffer) > CAPTURE_LIMIT:
                del self._buffer[: len(self._buffer) - CAPTURE_LIMIT]

    def _run(self) -> None:
        try:
            poller = select.poll()
            poller.register(self._fd, select.POLLIN)
            while True:
                poller.poll()
                with self._lock:
                    self._read_available()
                    if self._eof:
                        return
        finally:
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def take(self) -> str:
        with self._lock:
            if not self._eof:
                self._read_available()
            data = bytes(self._buffer)
            self._buffer.clear()
        return data.decode("utf-8", errors="replace")

    def wait_eof(self, timeout: float) -> None:
        self._thread.join(timeout)


# --- the Runtime API --------------------------------------------------------------------------------------


class _RuntimeApiServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    sandbox: Sandbox

    def handle_error(self, request: object, client_address: object) -> None:
        LOG.debug("runtime API connection error (%s)", self.sandbox.name, exc_info=True)


class _RuntimeApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _RuntimeApiServer

    def setup(self) -> None:
        super().setup()
        # With Nagle on, the runtime's next request waits for our delayed ACK (~40-90 ms an invoke).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _reply(self, status: int, body: bytes = b"", headers: Mapping[str, str] | None = None) -> None:
        lines = [
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
        ]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if self.close_connection:
            lines.append("Connection: close")
        # Status line, headers and body in one write: a separate body write waits for the delayed ACK.
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    def _error(self, status: int, error_type: str, message: str) -> None:
        self._reply(status, json.dumps({"errorType": error_type, "errorMessage": message}).encode())

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self) -> None:
        if self.path != f"{API_PREFIX}/invocation/next":
            self._error(404, "NotFound", f"unknown path {self.path}")
            return
        invocation = self.server.sandbox.next_invocation()
        if invocation is None:
            self.close_connection = True
            self._error(500, "Sandbox.Stopped", "the execution environment is shutting down")
            return
        self._reply(
            200,
            invocation.payload,
            {
                "Lambda-Runtime-Aws-Request-Id": invocation.request_id,
                "Lambda-Runtime-Deadline-Ms": str(invocation.deadline_ms),
                "Lambda-Runtime-Invoked-Function-Arn": invocation.function_arn,
                "Lambda-Runtime-Trace-Id": invocation.trace_id,
            },
        )

    def do_POST(self) -> None:
        body = self._read_body()
        error_type = self.headers.get("Lambda-Runtime-Function-Error-Type")
        sandbox = self.server.sandbox
        if self.path == f"{API_PREFIX}/init/error":
            sandbox.report_init_error(body, error_type)
            self._reply(202, b'{"status":"OK"}')
            return
        parts = self.path[len(API_PREFIX) :].strip("/").split("/")
        if not self.path.startswith(API_PREFIX) or len(parts) != 3 or parts[0] != "invocation":
            self._error(404, "NotFound", f"unknown path {self.path}")
            return
        request_id, what = parts[1], parts[2]
        if what == "response":
            if len(body) > sandbox.max_response_bytes:
                message = (
                    "Response payload size exceeded maximum allowed payload size "
                    f"({sandbox.max_response_bytes} bytes)."
                )
                error = json.dumps({"errorMessage": message, "errorType": "Function.ResponseSizeTooLarge"})
                sandbox.complete(request_id, "error", error.encode(), "Function.ResponseSizeTooLarge")
                self._error(413, "RequestEntityTooLarge", message)
                return
            accepted = sandbox.complete(request_id, "response", body, None)
        elif what == "error":
            accepted = sandbox.complete(request_id, "error", body, error_type or "Unhandled")
        else:
            self._error(404, "NotFound", f"unknown path {self.path}")
            return
        if accepted:
            self._reply(202, b'{"status":"OK"}')
        else:
            self._error(400, "InvalidRequestID", "Invalid request ID")


# --- the sandbox ------------------------------------------------------------------------------------------


class Sandbox:
    """A runtime process (``argv`` in ``cwd`` with ``env``) plus its Runtime API server."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str],
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.name = name
        self.max_response_bytes = max_response_bytes
        self.started = time.monotonic()
        self._cond = threading.Condition()
        self._pending: Invocation | None = None  # waiting for the runtime's next /next
        self._current: Invocation | None = None  # handed out, no answer yet
        self._ready_at: float | None = None  # when the runtime first asked for an invocation
        self._init_error: tuple[bytes, str | None] | None = None
        self._exit_status: int | None = None
        self._closed = False
        self._max_rss_mb = 0

        self._server = _RuntimeApiServer(("127.0.0.1", 0), _RuntimeApiHandler)
        self._server.sandbox = self
        port = self._server.server_address[1]
        threading.Thread(
            target=self._server.serve_forever, args=(0.5,), name=f"{name}-runtime-api", daemon=True
        ).start()
        try:
            self.process = spawn(
                args=list(argv),
                cwd=cwd,
                env={**env, "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{port}"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a kill takes what the handler started too
                close_fds=True,
            )
        except BaseException:
            self._shutdown_server()
            raise
        assert self.process.stdout is not None
        self.output = OutputCapture(os.dup(self.process.stdout.fileno()), name)
        self.process.stdout.close()
        threading.Thread(target=self._watch, name=f"{name}-watch", daemon=True).start()

    # called from the Runtime API handler threads

    def next_invocation(self) -> Invocation | None:
        with self._cond:
            if self._ready_at is None:
                self._ready_at = time.monotonic()
                self._cond.notify_all()
            self._cond.wait_for(lambda: self._pending is not None or self._closed)
            if self._closed or self._pending is None:
                return None
            invocation, self._pending = self._pending, None
            self._current = invocation
            return invocation

    def complete(self, request_id: str, kind: Kind, body: bytes, error_type: str | None) -> bool:
        with self._cond:
            invocation = self._current
            if invocation is None or invocation.request_id != request_id or invocation.kind is not None:
                return False
            invocation.kind, invocation.body, invocation.error_type = kind, body, error_type
            self._current = None
            self._cond.notify_all()
            return True

    def report_init_error(self, body: bytes, error_type: str | None) -> None:
        with self._cond:
            if self._init_error is None:
                self._init_error = (body, error_type)
            self._cond.notify_all()

    # called by the executor

    @property
    def alive(self) -> bool:
        with self._cond:
            return not self._closed and self._exit_status is None and self._init_error is None

    def wait_initialized(self, timeout: float | None) -> InitResult:
        with self._cond:
            done = self._cond.wait_for(
                lambda: (
                    self._ready_at is not None
                    or self._init_error is not None
                    or self._exit_status is not None
                    or self._closed
                ),
                timeout,
            )
            seconds = (self._ready_at or time.monotonic()) - self.started
            if self._init_error is not None:
                body, error_type = self._init_error
                return InitResult("init_error", seconds, body, error_type)
            if self._ready_at is not None:
                return InitResult("ready", seconds)
            if self._exit_status is not None:
                return InitResult("exit", seconds, exit_status=self._exit_status)
            if self._closed:
                return InitResult("stopped", seconds)
            assert not done
            return InitResult("timeout", seconds)

    def invoke(self, invocation: Invocation, timeout: float) -> Outcome:
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._closed:
                return Outcome("stopped")
            self._pending = invocation
            self._cond.notify_all()
            while True:
                if invocation.kind is not None:
                    return Outcome(invocation.kind, invocation.body, invocation.error_type)
                if self._closed:
                    return Outcome("stopped")
                if self._exit_status is not None:
                    return Outcome("exit", exit_status=self._exit_status)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._pending = self._current = None
                    return Outcome("timeout")
                self._cond.wait(remaining)

    def max_memory_used_mb(self) -> int:
        """The process's peak resident set (VmHWM), the last value read once it has exited."""
        try:
            with open(f"/proc/{self.process.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        self._max_rss_mb = max(self._max_rss_mb, -(-int(line.split()[1]) // 1024))
                        break
        except (OSError, ValueError):
            pass
        return self._max_rss_mb

    def kill(self) -> None:
        """Kill the process group (the runtime and anything it started) and wait for the runtime."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self.kill()
        self._shutdown_server()

    def _shutdown_server(self) -> None:
        # shutdown() waits for serve_forever's poll loop: do it aside, the process is dead already.
        def stop() -> None:
            self._server.shutdown()
            self._server.server_close()

        threading.Thread(target=stop, name=f"{self.name}-api-stop", daemon=True).start()

    def _watch(self) -> None:
        status = self.process.wait()
        with self._cond:
            self._exit_status = status
            self._cond.notify_all()
