"""No function records an event or an answer in its traces or logs (SECURITY.md): an answer of the api
function may hold a token just issued (``POST /v1/tokens``) or a job's signing keys (``GET .../signing-key``),
its event the caller's token and the request's body (a target's header secrets), the authorizer's event a
token.
powertools' tracer records a handler's answer and error as trace metadata and its logger the event when the
environment says so (``POWERTOOLS_TRACER_CAPTURE_RESPONSE``, ``POWERTOOLS_TRACER_CAPTURE_ERROR``,
``POWERTOOLS_LOGGER_LOG_EVENT``): each handler says no in code, so these tests set all three to true and look
at everything the tracer hands its provider and every log record."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest

from duetime import wiring
from duetime.execution.run_batch import BatchOutcome
from duetime.scheduling.fan_out import FanOutSetting

from ..api_twin import TwinApi, serving_twin
from ..lambda_support import LambdaContext, api_request, load_handler

NOW = datetime(2026, 12, 17, 12, 0, tzinfo=UTC)
SECRETS = re.compile(r"dt_[A-Za-z0-9_-]{8}|whsec_|s3cret-header|SECRET-MARKER")
HOSTILE_ENVIRONMENT = {
    "POWERTOOLS_TRACER_CAPTURE_RESPONSE": "true",
    "POWERTOOLS_TRACER_CAPTURE_ERROR": "true",
    "POWERTOOLS_LOGGER_LOG_EVENT": "true",
}


class RecordingSubsegment:
    def __init__(self, given: list[tuple[str, str, Any]]) -> None:
        self.given = given

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        self.given.append(("metadata", key, value))

    def put_annotation(self, key: str, value: Any) -> None:
        self.given.append(("annotation", key, value))


class RecordingProvider:
    """A tracing provider keeping what it is given: metadata, annotations, and each exception that leaves a
    subsegment (X-Ray records those as the subsegment's cause)."""

    def __init__(self) -> None:
        self.given: list[tuple[str, str, Any]] = []

    @contextmanager
    def in_subsegment(self, name: str, **kwargs: Any) -> Iterator[RecordingSubsegment]:
        try:
            yield RecordingSubsegment(self.given)
        except Exception as exc:
            self.given.append(("exception", name, exc))
            raise

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        self.given.append(("metadata", key, value))

    def put_annotation(self, key: str, value: Any) -> None:
        self.given.append(("annotation", key, value))

    def text(self) -> str:
        return "\n".join(f"{kind} {key} {value!r}" for kind, key, value in self.given)


class RecordingHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        exception = logging.Formatter().formatException(record.exc_info) if record.exc_info else ""
        self.lines.append(f"{record.getMessage()} {record.__dict__!r} {exception}")


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingHandler]:
    """Every record any logger emits, at any level, while the test runs (the functions' powertools loggers
    propagate to no one: each is watched by name), with powertools' variables asking to record everything."""
    for name, value in HOSTILE_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    handler = RecordingHandler()
    watched = [logging.getLogger()] + [
        logging.getLogger(f"duetime-{service}")
        for service in ("api", "authorizer", "worker", "poller", "poller-helper", "prescaler")
    ]
    levels = [logger.level for logger in watched]
    for logger in watched:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    yield handler
    for logger, level in zip(watched, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


def traced(name: str, file: str = "handler") -> tuple[ModuleType, RecordingProvider]:
    module = load_handler(name, file)
    provider = RecordingProvider()
    module.tracer.provider = provider
    return module, provider


def leaked(text: str, *needles: str) -> list[str]:
    return SECRETS.findall(text) + [needle for needle in needles if needle in text]


def assert_nothing_recorded(
    provider: RecordingProvider | None,
    logs: RecordingHandler,
    printed: str,
    *needles: str,
) -> None:
    if provider is not None:
        assert leaked(provider.text(), *needles) == [], provider.text()
        assert ("annotation", "Service") in [(kind, key) for kind, key, _ in provider.given]  # it traced
        assert not [entry for entry in provider.given if entry[0] == "metadata"]
    everything_logged = "\n".join(logs.lines) + printed
    assert leaked(everything_logged, *needles) == [], everything_logged


# --- the api function: tokens issued, signing keys, request bodies ---------------------------------------


@pytest.fixture
def twin() -> Iterator[TwinApi]:
    with serving_twin(NOW) as twin:
        yield twin


def call_api(module: ModuleType, twin: TwinApi, method: str, path: str, body: Any = None) -> dict[str, Any]:
    return api_request(method, path, twin.token, None if body is None else json.dumps(body), api=module)


def test_a_token_issued_by_the_api_is_in_its_answer_and_nowhere_in_traces_or_logs(
    twin: TwinApi, logs: RecordingHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    api, provider = traced("api")
    response = call_api(api, twin, "POST", "/v1/tokens", {"name": "ci", "scope": "read"})
    assert response["statusCode"] == 201
    issued = json.loads(response["body"])["token"]
    assert issued.startswith("dt_")
    assert_nothing_recorded(provider, logs, capsys.readouterr().out, issued, twin.token, response["body"])


def test_a_jobs_signing_keys_and_its_header_secrets_are_nowhere_in_traces_or_logs(
    twin: TwinApi, logs: RecordingHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    api, provider = traced("api")
    spec = {
        "name": "nightly",
        "schedule": {"cron": "0 2 * * *"},
        "target": {"url": "https://example.com/hook", "headers": {"Authorization": "Bearer s3cret-header"}},
    }
    created = call_api(api, twin, "POST", "/v1/jobs", spec)
    assert created["statusCode"] == 201
    job_id = json.loads(created["body"])["id"]
    response = call_api(api, twin, "GET", f"/v1/jobs/{job_id}/signing-key")
    assert response["statusCode"] == 200
    (key, *_) = json.loads(response["body"])["keys"]
    assert key["secret"].startswith("whsec_")
    assert_nothing_recorded(provider, logs, capsys.readouterr().out, key["secret"], twin.token)


def test_an_api_request_that_fails_puts_no_error_and_no_body_in_the_trace(
    twin: TwinApi, logs: RecordingHandler, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception leaving the handler: the trace's cause names it (X-Ray's own record: its type, its
    message and the stack), the metadata holds no copy of it, and no log holds the request."""

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the store is down")

    api, provider = traced("api")
    monkeypatch.setattr(twin.service, "issue_token_for", fails)
    with pytest.raises(RuntimeError):
        call_api(api, twin, "POST", "/v1/tokens", {"name": "SECRET-MARKER", "scope": "read"})
    assert [kind for kind, _, _ in provider.given if kind != "annotation"] == ["exception"]
    assert_nothing_recorded(provider, logs, capsys.readouterr().out, twin.token)


# --- the authorizer: the token it checks -----------------------------------------------------------------


def test_the_authorizer_logs_neither_the_token_it_checks_nor_its_answer(
    twin: TwinApi, logs: RecordingHandler, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wiring, "job_service", lambda: twin.service)
    authorizer = load_handler("authorizer")
    arn = "arn:aws:execute-api:us-east-1:000000000000:api/v1/GET/v1/jobs"
    policy = authorizer.handler(
        {"authorizationToken": f"Bearer {twin.token}", "methodArn": arn}, LambdaContext()
    )
    assert policy["context"]["team_id"] == "alpha"
    with pytest.raises(Exception, match="Unauthorized"):
        authorizer.handler(
            {"authorizationToken": "Bearer dt_refused-token", "methodArn": arn}, LambdaContext()
        )
    assert_nothing_recorded(None, logs, capsys.readouterr().out, twin.token, "refused-token")


# --- the other functions: their events and answers -------------------------------------------------------


class Report:
    def summary(self) -> dict[str, Any]:
        return {"marker": "SECRET-MARKER"}


class Shift:
    def fan_out_setting(self) -> FanOutSetting:
        return FanOutSetting(helpers=False)

    def serve(self, *args: Any, **kwargs: Any) -> Report:
        return Report()

    def serve_helper(self, *args: Any, **kwargs: Any) -> Report:
        return Report()


HELPER_EVENT = {
    "helper": {
        "group": "SECRET-MARKER",
        "partitions": [4],
        "minute": "2026-12-17T12:00:00Z",
        "serve_until": "2026-12-17T12:03:00Z",
    }
}


def sqs_event(body: str) -> dict[str, Any]:
    record = {
        "messageId": "m1",
        "receiptHandle": "h",
        "body": body,
        "attributes": {},
        "eventSource": "aws:sqs",
    }
    return {"Records": [record]}


def worker_fails_the_batch(module: ModuleType) -> None:
    module.work_batch = lambda worker, records: BatchOutcome(failed=[message_id for message_id, _ in records])


FUNCTIONS: dict[str, tuple[str, str, dict[str, Any], Callable[[ModuleType], None]]] = {
    "poller": ("poller", "handler", {"detail": {"run_seconds": 1, "note": "SECRET-MARKER"}}, lambda m: None),
    "poller helper": ("poller", "helper", HELPER_EVENT, lambda m: None),
    "worker": ("worker", "handler", sqs_event('{"headers": "SECRET-MARKER"}'), worker_fails_the_batch),
}


@pytest.mark.parametrize("function", FUNCTIONS.values(), ids=FUNCTIONS.keys())
def test_a_functions_event_and_answer_are_nowhere_in_its_traces_or_logs(
    function: tuple[str, str, dict[str, Any], Callable[[ModuleType], None]],
    logs: RecordingHandler,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, file, event, prepare = function
    monkeypatch.setattr(wiring, "poller_shift", Shift)
    monkeypatch.setattr(wiring, "worker", lambda: None)
    module, provider = traced(name, file)
    prepare(module)
    answer = module.handler(event, LambdaContext())
    assert answer  # the answer the tracer was not given
    assert_nothing_recorded(provider, logs, capsys.readouterr().out, "batchItemFailures")


def test_the_prescalers_answer_is_not_in_its_trace(
    logs: RecordingHandler, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its decision (counts and concurrency) is logged on purpose; the trace holds no copy, nor the event."""

    class Prescaler:
        def tick(self) -> Report:
            return Report()

    monkeypatch.setattr(wiring, "prescaler", Prescaler)
    prescaler, provider = traced("prescaler")
    assert prescaler.handler({"detail": {"note": "dt_from-the-event"}}, LambdaContext()) == Report().summary()
    assert leaked(provider.text()) == [] and not [e for e in provider.given if e[0] == "metadata"]
    assert "dt_from-the-event" not in "\n".join(logs.lines) + capsys.readouterr().out


def test_every_function_says_no_in_code_whatever_the_environment_says() -> None:
    """Each handler's decorators: the response and error never captured, the event never logged."""
    from ..lambda_support import ROOT

    for path in sorted((ROOT / "functions").glob("*/*.py")):
        text = path.read_text()
        assert text.count("@logger.inject_lambda_context(") == 1 and "log_event=False" in text, path
        if "Tracer(" in text:
            assert "capture_lambda_handler(capture_response=False, capture_error=False)" in text, path
        assert "capture_method" not in text, path


class PatchRecordingProvider(RecordingProvider):
    """A provider that also keeps what the tracer asks it to patch (X-Ray's instrumentation of libraries)."""

    def __init__(self) -> None:
        super().__init__()
        self.patched: list[Any] = []

    def patch(self, modules: Any) -> None:
        self.patched.append(tuple(modules))

    def patch_all(self) -> None:
        self.patched.append("all")


@pytest.mark.parametrize(
    ("name", "file"),
    [
        ("api", "handler"),
        ("worker", "handler"),
        ("poller", "handler"),
        ("poller", "helper"),
        ("prescaler", "handler"),
    ],
)
def test_a_functions_tracer_patches_aws_calls_only_never_the_http_client_that_calls_targets(
    monkeypatch: pytest.MonkeyPatch, name: str, file: str
) -> None:
    """X-Ray's http.client patch would record each target's URL (a Slack webhook's path is its secret) and
    send the trace id to the target: every function's tracer patches botocore and nothing else."""
    from aws_lambda_powertools import Tracer

    monkeypatch.setenv("LAMBDA_TASK_ROOT", "/var/task")  # in Lambda, so tracing is on and patches
    monkeypatch.delenv("POWERTOOLS_TRACE_DISABLED", raising=False)
    provider = PatchRecordingProvider()
    Tracer._reset_config()
    try:
        Tracer(provider=provider, disabled=False)  # powertools keeps a tracer's settings for all tracers
        provider.patched.clear()  # what that tracer asked (everything, by default)
        load_handler(name, file)
    finally:
        Tracer._reset_config()
    assert provider.patched == [("botocore",)]
