"""LocalStack's ``RuntimeExecutor`` interface on top of :class:`~.sandbox.Sandbox` processes.

Each execution environment runs ``python -m awslambdaric <handler>`` (AWS's runtime interface client) in the
function's unzipped code folder, on LocalStack's own Python, whatever runtime the function declares.
``invoke()`` is synchronous: it returns LocalStack's ``InvocationResult`` itself, so LocalStack's callback
endpoint (``/_localstack_lambda/...``) is not used. The executor enforces the function's timeout (the
process is killed and the invoke answers ``Sandbox.Timedout``), answers ``Runtime.ExitError`` as soon as the
process dies mid-invoke, and writes Lambda's START/END/REPORT lines into the logs it returns. After a
timeout, a crash or an init error the next invoke starts a new process, as Lambda starts a new sandbox.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import deque

from localstack.aws.api.lambda_ import Architecture, PackageType
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion, InvocationResult
from localstack.services.lambda_.invocation.runtime_executor import LambdaRuntimeException, RuntimeExecutor

from localstack import config

from .sandbox import InitResult, Invocation, Outcome, Sandbox

LOG = logging.getLogger(__name__)

LOG_HISTORY_CHARS = 1024 * 1024  # get_logs() keeps the last MB of an environment's logs
PYTHON_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
# Go's names for the signals that end a process, as Lambda's "Runtime exited with error: signal: ..."
_SIGNAL_TEXT = {
    signal.SIGKILL: "killed",
    signal.SIGSEGV: "segmentation fault",
    signal.SIGABRT: "aborted",
    signal.SIGTERM: "terminated",
    signal.SIGBUS: "bus error",
}
_warned: set[str] = set()


def _warn_once(key: str, message: str, *args: object) -> None:
    if key not in _warned:
        _warned.add(key)
        LOG.warning(message, *args)


def _runtime_dir() -> str:
    """Where awslambdaric is installed: /var/runtime on Lambda."""
    spec = importlib.util.find_spec("awslambdaric")
    origin = spec.origin if spec else None
    return os.path.dirname(os.path.dirname(origin)) if origin else ""


def _exit_text(status: int | None) -> str:
    if status is None or status == 0:
        return "Runtime exited without providing a reason"
    if status < 0:
        try:
            sig = signal.Signals(-status)
            text = _SIGNAL_TEXT.get(sig, sig.name)
        except ValueError:
            text = str(-status)
        return f"Runtime exited with error: signal: {text}"
    return f"Runtime exited with error: exit status {status}"


def _error_payload(error_type: str, message: str) -> bytes:
    return json.dumps({"errorType": error_type, "errorMessage": message}).encode()


class ProcessRuntimeExecutor(RuntimeExecutor):
    """An execution environment that is a local process (see the module's docstring)."""

    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id=id, function_version=function_version)
        self._lock = threading.Lock()
        self._env: dict[str, str] = {}
        self._sandbox: Sandbox | None = None
        self._sandboxes = 0
        self._stopped = False
        self._tmp_dir: str | None = None
        self._init: tuple[InitResult, str] | None = None  # an init not yet reported in an invoke's logs
        self._history: deque[str] = deque()
        self._history_chars = 0

    # --- version preparation -------------------------------------------------------------------------------

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        cfg = function_version.config
        if cfg.package_type != PackageType.Zip:
            raise LambdaRuntimeException(
                "duetime-process runs zip-packaged functions only (no container images)"
            )
        arn = function_version.qualified_arn
        if cfg.runtime and not str(cfg.runtime).startswith("python"):
            _warn_once(
                f"runtime:{arn}",
                "%s declares %s: duetime-process runs it on Python %s",
                arn,
                cfg.runtime,
                PYTHON_VERSION,
            )
        if (
            cfg.architectures
            and cfg.architectures[0] == Architecture.arm64
            and os.uname().machine != "aarch64"
        ):
            _warn_once(
                f"arch:{arn}",
                "%s declares arm64 but runs on this %s machine: its code needs wheels for this machine",
                arn,
                os.uname().machine,
            )
        if cfg.layers:
            _warn_once(f"layers:{arn}", "%s has layers: duetime-process does not provide them in /opt", arn)
        if cfg.code:
            cfg.code.prepare_for_execution()

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass  # the unzipped code belongs to LocalStack's code object (destroy_cached)

    @classmethod
    def validate_environment(cls) -> bool:
        if importlib.util.find_spec("awslambdaric") is None:
            LOG.warning(
                "duetime-process needs awslambdaric in LocalStack's venv (scripts/emulators.sh fetch)"
            )
            return False
        return True

    # --- addresses (everything is on this host) ------------------------------------------------------------

    def get_address(self) -> str:
        return "127.0.0.1"

    def get_endpoint_from_executor(self) -> str:
        return "127.0.0.1"

    def get_runtime_endpoint(self) -> str:
        return f"http://127.0.0.1:{config.GATEWAY_LISTEN[0].port}/_localstack_lambda/{self.id}"

    # --- lifecycle -----------------------------------------------------------------------------------------

    def start(self, env_vars: dict[str, str]) -> None:
        cfg = self.function_version.config
        if not cfg.handler:
            raise LambdaRuntimeException("the function has no handler")
        code_dir = str(cfg.code.get_unzipped_code_location())
        self._tmp_dir = tempfile.mkdtemp(prefix=f"lambda-{self.id}-")
        env = {
            "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            **{k: str(v) for k, v in env_vars.items() if v is not None},
            # What LocalStack sets for its Docker image, made true for a local process:
            "LAMBDA_TASK_ROOT": code_dir,
            "LAMBDA_RUNTIME_DIR": _runtime_dir(),
            "TMPDIR": self._tmp_dir,
            "PYTHONUNBUFFERED": "1",
        }
        if cfg.runtime and str(cfg.runtime).startswith("python"):
            env["AWS_EXECUTION_ENV"] = f"AWS_Lambda_{cfg.runtime}"
        env.pop("AWS_LAMBDA_MAX_CONCURRENCY", None)  # awslambdaric's multi-concurrency mode is not served
        self._env = env
        with self._lock:
            if self._stopped:
                raise LambdaRuntimeException(f"execution environment {self.id} stopped during startup")
            sandbox = self._new_sandbox()
        init = sandbox.wait_initialized(None)  # LocalStack's startup timer calls stop() if it takes too long
        if init.kind == "stopped":
            raise LambdaRuntimeException(f"execution environment {self.id} stopped during startup")
        self._init = (init, sandbox.output.take())
        LOG.debug("environment %s of %s initialised in %.1f ms", self.id, self._arn, init.seconds * 1000)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()
        if self._tmp_dir:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)

    def get_logs(self) -> str:
        return "".join(self._history)

    # --- invoke --------------------------------------------------------------------------------------------

    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        request_id = payload["invoke-id"]
        timeout = float(self.function_version.config.timeout)
        began = time.monotonic()
        fresh = False
        with self._lock:
            if self._stopped:
                raise LambdaRuntimeException(f"execution environment {self.id} is stopped")
            init_report, self._init = self._init, None
            sandbox = self._sandbox
            failed_init = init_report is not None and init_report[0].kind != "ready"
            if not failed_init and (sandbox is None or not sandbox.alive):  # else: report that init first
                if sandbox is not None:
                    sandbox.close()
                sandbox, fresh = self._new_sandbox(), True
        assert sandbox is not None
        if fresh:  # Lambda's "suppressed init": a new sandbox, initialised within the invoke's timeout
            init = sandbox.wait_initialized(timeout)
            init_report = (init, sandbox.output.take())
        before = sandbox.output.take()  # output between two invokes belongs before START

        if init_report is not None and init_report[0].kind != "ready":
            outcome = self._init_outcome(init_report[0])
        else:
            remaining = timeout - (time.monotonic() - began)
            invocation = Invocation(
                request_id=request_id,
                payload=payload["payload"].encode(),
                function_arn=payload["invoked-function-arn"],
                trace_id=payload.get("trace-id") or "",
                deadline_ms=int(time.time() * 1000 + remaining * 1000),
            )
            outcome = sandbox.invoke(invocation, remaining)
        duration_ms = (time.monotonic() - began) * 1000
        if fresh and init_report is not None:
            duration_ms -= init_report[0].seconds * 1000
        if outcome.kind == "stopped":
            raise LambdaRuntimeException(f"execution environment {self.id} was stopped during the invoke")
        memory_mb = sandbox.max_memory_used_mb()
        if outcome.kind not in ("response", "error") or not sandbox.alive:
            sandbox.close()  # a timeout kills it; an exit or init error leaves it unusable
            sandbox.output.wait_eof(1.0)
        during = sandbox.output.take()
        return self._result(request_id, outcome, init_report, before, during, duration_ms, memory_mb, timeout)

    def _new_sandbox(self) -> Sandbox:  # with the lock held
        cfg = self.function_version.config
        self._sandboxes += 1
        max_bytes = int(self._env.get("LOCALSTACK_MAX_PAYLOAD_SIZE") or 0) or None
        sandbox = Sandbox(
            name=f"lambda-{self.function_version.id.function_name}-{self.id[:8]}-{self._sandboxes}",
            argv=[sys.executable, "-m", "awslambdaric", str(cfg.handler)],
            cwd=str(cfg.code.get_unzipped_code_location()),
            env=self._env,
            **({"max_response_bytes": max_bytes} if max_bytes else {}),
        )
        self._sandbox = sandbox
        return sandbox

    def _init_outcome(self, init: InitResult) -> Outcome:
        if init.kind == "init_error":
            return Outcome("error", init.body, init.error_type or "Runtime.Unknown")
        if init.kind == "exit":
            return Outcome("exit", exit_status=init.exit_status)
        if init.kind == "timeout":
            return Outcome("timeout")
        return Outcome("stopped")

    def _result(
        self,
        request_id: str,
        outcome: Outcome,
        init_report: tuple[InitResult, str] | None,
        before: str,
        during: str,
        duration_ms: float,
        memory_mb: int,
        timeout: float,
    ) -> InvocationResult:
        cfg = self.function_version.config
        lines: list[str] = []
        if init_report is not None:
            lines.append(f"INIT_START Runtime Version: python:{PYTHON_VERSION}.local")
            lines.append(init_report[1])
        lines += [
            before,
            f"START RequestId: {request_id} Version: {self.function_version.id.qualifier}\n",
            during,
        ]
        status = ""
        if outcome.kind in ("response", "error"):
            payload, is_error = outcome.body, outcome.kind == "error"
            if init_report is not None and init_report[0].kind == "init_error":
                status = f"\tStatus: error\tError Type: {outcome.error_type}"
        elif outcome.kind == "timeout":
            duration_ms = max(duration_ms, timeout * 1000)
            now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
            message = f"Task timed out after {timeout:.2f} seconds"
            lines.append(f"{now}Z {request_id} {message}\n")
            payload, is_error = (
                _error_payload("Sandbox.Timedout", f"RequestId: {request_id} Error: {message}"),
                True,
            )
            status = "\tStatus: timeout"
        else:  # exit
            message = f"RequestId: {request_id} Error: {_exit_text(outcome.exit_status)}"
            lines.append(f"{message}\nRuntime.ExitError\n")
            payload, is_error = _error_payload("Runtime.ExitError", message), True
            status = "\tStatus: error\tError Type: Runtime.ExitError"
        lines.append(f"END RequestId: {request_id}\n")
        billed = duration_ms
        report = f"REPORT RequestId: {request_id}\tDuration: {duration_ms:.2f} ms"
        init_text = ""
        if init_report is not None:
            init_text = f"\tInit Duration: {init_report[0].seconds * 1000:.2f} ms"
            billed += init_report[0].seconds * 1000  # Lambda bills the init of on-demand functions too
        report += f"\tBilled Duration: {max(1, math.ceil(billed))} ms\tMemory Size: {cfg.memory_size} MB"
        lines.append(f"{report}\tMax Memory Used: {memory_mb} MB{init_text}{status}\n")
        logs = "".join(part if not part or part.endswith("\n") else part + "\n" for part in lines)
        self._remember(logs)
        return InvocationResult(request_id=request_id, payload=payload, is_error=is_error, logs=logs)

    def _remember(self, logs: str) -> None:
        self._history.append(logs)
        self._history_chars += len(logs)
        while self._history_chars > LOG_HISTORY_CHARS and len(self._history) > 1:
            self._history_chars -= len(self._history.popleft())

    @property
    def _arn(self) -> str:
        return str(self.function_version.qualified_arn)
