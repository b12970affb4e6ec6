"""The hot path's DynamoDB and SQS requests, sent without botocore's per-request pipeline.

A botocore request costs about a millisecond of CPU before the first byte is sent and after the last is
read (serializing by the service model, a dozen events, its HTTP layer, parsing the answer by the model),
and a Query page of 250 rows another 20 ms to parse: measured on this project's claim path, 60% of the
poller's CPU a run (``duetime bench runcpu``). For the operations in ``LEAN_OPERATIONS``, whose requests
and answers are plain JSON for the items duetime writes (strings and numbers, never binary), ``LeanClient``
sends the same request itself: ``json.dumps``, SigV4 (``sigv4``, checked against ``botocore.auth``), the
standard library's ``http.client`` on a keep-alive connection per thread, ``json.loads``.

Everything around the request stays botocore's, on the wrapped client's own event system, so what hooks a
client sees them all (the store clock, the strict-limits check, the benches' ledgers, the tests' faults):
``provide-client-params`` and ``before-parameter-build`` with the parameters, ``before-call`` with the
request (a handler's answer is used, as botocore does), ``before-send`` with the prepared request (an
answer is used instead of sending), ``needs-retry`` (the client's own retry handler, standard mode, decides
and names the delay), ``after-call``. Errors are parsed by botocore's parser and raised as the client's own
exception classes. A paginator of a lean operation (``get_paginator("query")``) fetches its pages the lean
way. Every other operation, and every operation when the client goes through a proxy, is the boto3
client's, unchanged. ``DUETIME_LEAN_TRANSPORT=0`` turns it off.

What it leaves out of botocore's request: parameter validation (off in ``clients`` anyway), the endpoint
rules (the client's resolved endpoint is used), request compression and checksums (none for these
operations), X-Ray's patch of botocore (these calls make no subsegment).
"""

from __future__ import annotations

import functools
import http.client
import json
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlsplit

import botocore.session
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import (
    BotoCoreError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.httpsession import get_cert_path
from botocore.paginate import Paginator
from botocore.parsers import create_parser

from duetime.adapters.aws.sigv4 import PostSigner

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from botocore.credentials import Credentials

_Client = TypeVar("_Client", bound="BaseClient")

log = logging.getLogger(__name__)
LEAN_ENV = "DUETIME_LEAN_TRANSPORT"
# Operations whose answers ``json.loads`` reads as botocore's parser does, for items without binary
# attributes: no timestamps or blobs elsewhere in their output shapes (tests/integration/test_lean_transport
# compares the two on every one).
LEAN_OPERATIONS: Mapping[str, frozenset[str]] = {
    "dynamodb": frozenset(
        {
            "GetItem",
            "PutItem",
            "UpdateItem",
            "DeleteItem",
            "Query",
            "BatchGetItem",
            "BatchWriteItem",
            "BatchExecuteStatement",
            "ExecuteStatement",
            "TransactWriteItems",
            "TransactGetItems",
        }
    ),
    "sqs": frozenset(
        {
            # ReceiveMessage: its only blobs are message attributes' binary values, which duetime neither
            # sends nor asks for (a run message is its body); what asks for them goes through botocore.
            "ReceiveMessage",
            "SendMessage",
            "SendMessageBatch",
            "DeleteMessage",
            "DeleteMessageBatch",
            "ChangeMessageVisibility",
            "ChangeMessageVisibilityBatch",
        }
    ),
}
# Parameters that make a lean operation's answer hold blobs (base64 for botocore to decode): such a call goes
# through the wrapped client.
_ASKS_FOR_BLOBS: Mapping[str, str] = {"ReceiveMessage": "MessageAttributeNames"}
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def lean_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether clients get the lean transport: on unless ``DUETIME_LEAN_TRANSPORT`` is 0/false, and never
    through a proxy (the variables botocore would honour)."""
    env = os.environ if environ is None else environ
    if env.get(LEAN_ENV, "1").lower() in ("0", "false", "no", "off"):
        return False
    return not any(env.get(name) for name in _PROXY_VARIABLES)


def with_lean_transport(client: _Client, credentials: Credentials | None) -> _Client:
    """``client`` wrapped so that its ``LEAN_OPERATIONS`` go by the lean transport; ``client`` itself for
    other services, a client configured with proxies, or no credentials to sign with."""
    service = client.meta.service_model.service_name
    proxies = getattr(client.meta.config, "proxies", None)  # set by Config(proxies=...); the stubs omit it
    if service not in LEAN_OPERATIONS or credentials is None or proxies:
        return client
    if urlsplit(client.meta.endpoint_url).path not in ("", "/"):
        return client  # requests go to the endpoint's root, as the signature says
    model = client.meta.service_model
    if _protocol(model) != "json" or "targetPrefix" not in model.metadata:
        return client  # an older botocore's SQS model (the query protocol): nothing to send lean
    # The stand-in keeps the client's type: what LeanClient does not send itself is the wrapped client's
    # (``__getattr__``), and what it sends answers as the client would (the module docstring).
    return cast(_Client, LeanClient(client, credentials))


class _Body:
    """An answer's body as botocore's ``AWSResponse`` reads it (``stream()``)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data


class _Connections(threading.local):
    """One keep-alive connection per thread (the claim pool sends from several threads at once)."""

    connection: http.client.HTTPConnection | None = None


class LeanClient:
    """A boto3 DynamoDB or SQS client whose ``LEAN_OPERATIONS`` are sent by this module; any other
    attribute (``meta``, ``exceptions``, every other operation) is the wrapped client's."""

    def __init__(self, client: Any, credentials: Any) -> None:
        self._client = client
        self._credentials = credentials
        meta = client.meta
        self._model = meta.service_model
        self._service_id = self._model.service_id.hyphenize()
        self._signing_name = self._model.signing_name
        self._region = meta.region_name
        self._url = meta.endpoint_url.rstrip("/") + "/"
        parts = urlsplit(self._url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        # What http.client would send, and so what is signed (botocore's ``_host_from_url`` likewise).
        self._host_header = self._host if parts.port in (None, 443 if self._https else 80) else parts.netloc
        self._signer = PostSigner(self._signing_name, self._region)
        self._target_prefix = self._model.metadata["targetPrefix"]
        self._content_type = f"application/x-amz-json-{self._model.metadata.get('jsonVersion', '1.0')}"
        self._query_compatible = "awsQueryCompatible" in self._model.metadata
        self._timeouts = (meta.config.connect_timeout, meta.config.read_timeout)
        self._ssl: ssl.SSLContext | None = None
        self._connections = _Connections()
        self._error_parser = create_parser(_protocol(self._model))
        lean = LEAN_OPERATIONS[self._model.service_name]
        self._methods = {
            method: operation for method, operation in meta.method_to_api_mapping.items() if operation in lean
        }
        self._method_of = {operation: method for method, operation in self._methods.items()}

    def __getattr__(self, name: str) -> Any:
        operation = self._methods.get(name)
        if operation is None:
            return getattr(self._client, name)
        return functools.partial(self._call, operation)

    def get_paginator(self, operation_name: str) -> Any:
        """The wrapped client's paginator, except that a lean operation's pages are this client's requests
        (the wrapped client's own paginator would send each page of a Query by botocore)."""
        operation = self._methods.get(operation_name)
        if operation is None or not self._client.can_paginate(operation_name):
            return self._client.get_paginator(operation_name)
        return Paginator(
            getattr(self, operation_name),
            _page_config(self._model.service_name, self._model.api_version, operation),
            self._model.operation_model(operation),
        )

    @property
    def wrapped(self) -> Any:
        """The boto3 client this one stands in front of."""
        return self._client

    # --- one call ---------------------------------------------------------------------------------------

    def _call(self, operation: str, **params: Any) -> Any:
        """What ``client.<operation>(**params)`` returns or raises, with the events botocore emits."""
        if params.get(_ASKS_FOR_BLOBS.get(operation, "")):
            return getattr(self._client, self._method_of[operation])(**params)
        model = self._model.operation_model(operation)
        events = self._client.meta.events
        event = f"{self._service_id}.{operation}"
        context: dict[str, Any] = {"client_region": self._region, "client_config": self._client.meta.config}
        answers = events.emit(f"provide-client-params.{event}", params=params, model=model, context=context)
        params = next((answer for _, answer in answers if answer is not None), params)
        events.emit(f"before-parameter-build.{event}", params=params, model=model, context=context)
        headers = {"Content-Type": self._content_type, "X-Amz-Target": f"{self._target_prefix}.{operation}"}
        if self._query_compatible:
            headers["x-amzn-query-mode"] = "true"
        request_dict = {
            "url_path": "/",
            "query_string": "",
            "method": "POST",
            "headers": headers,
            "body": _json_body(params, operation),
            "url": self._url,
            "context": context,
        }
        _, answer = events.emit_until_response(
            f"before-call.{event}", model=model, params=request_dict, request_signer=None, context=context
        )
        if answer is not None:
            http_response, parsed = answer
        else:
            http_response, parsed = self._send_with_retries(event, model, request_dict)
        events.emit(
            f"after-call.{event}", http_response=http_response, parsed=parsed, model=model, context=context
        )
        if http_response.status_code >= 300:
            code = context.get("error_code_override") or parsed.get("Error", {}).get("Code")
            raise self._client.exceptions.from_code(code)(parsed, operation)
        return parsed

    def _send_with_retries(self, event: str, model: Any, request_dict: dict[str, Any]) -> tuple[Any, Any]:
        """Send until the client's retry handler (``needs-retry``) wants no more; as botocore's endpoint."""
        events = self._client.meta.events
        attempts = 0
        while True:
            attempts += 1
            response: tuple[AWSResponse, dict[str, Any]] | None = None
            caught: Exception | None = None
            try:
                response = self._send_once(event, model, request_dict)
            except Exception as exc:  # a connection error is the retry handler's to judge
                caught = exc
            answers = events.emit(
                f"needs-retry.{event}",
                response=response,
                endpoint=self,
                operation=model,
                attempts=attempts,
                caught_exception=caught,
                request_dict=request_dict,
            )
            delay = next((answer for _, answer in answers if answer is not None), None)
            if delay is None:
                break
            time.sleep(delay)
        if caught is not None:
            raise caught
        assert response is not None
        response[1].setdefault("ResponseMetadata", {})["RetryAttempts"] = attempts - 1
        return response

    def _send_once(self, event: str, model: Any, request_dict: dict[str, Any]) -> tuple[Any, Any]:
        body: bytes = request_dict["body"]
        headers = {"Host": self._host_header, **request_dict["headers"]}
        self._signer.sign(headers, body, self._credentials.get_frozen_credentials())
        request = AWSPreparedRequest("POST", self._url, HTTPHeaders.from_dict(headers), body, False)
        answers = self._client.meta.events.emit(f"before-send.{event}", request=request)
        http_response = next((answer for _, answer in answers if answer is not None), None)
        if http_response is None:
            status, message, data = self._exchange(body, headers)
            # The answer's headers as http.client read them: a case-insensitive message, as botocore's are.
            http_response = AWSResponse(self._url, status, cast(HTTPHeaders, message), _Body(data))
        return http_response, self._parse(http_response, model)

    def _parse(self, http_response: Any, model: Any) -> dict[str, Any]:
        """A success as ``json.loads`` reads it; an error by botocore's parser, with its modeled fields."""
        headers = http_response.headers
        body = http_response.content
        if http_response.status_code < 300:
            parsed: dict[str, Any] = json.loads(body) if body else {}
            parsed["ResponseMetadata"] = {
                "RequestId": headers.get("x-amzn-requestid", ""),
                "HTTPStatusCode": http_response.status_code,
                "HTTPHeaders": {name.lower(): value for name, value in headers.items()},
            }
            return parsed
        response_dict = {"status_code": http_response.status_code, "headers": headers, "body": body}
        parsed = self._error_parser.parse(response_dict, model.output_shape)
        shape = self._model.shape_for_error_code(parsed.get("Error", {}).get("Code"))
        if shape is not None:
            parsed.update(self._error_parser.parse(response_dict, shape))
        return parsed

    # --- the connection ---------------------------------------------------------------------------------

    def _exchange(
        self, body: bytes, headers: Mapping[str, str]
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One request on this thread's keep-alive connection. A connection the server closed while idle
        is opened again once (nothing was read: the request never reached it); any other failure raises as
        botocore's connection errors, for the retry handler."""
        for fresh in (False, True):
            reused = self._connections.connection is not None and not fresh
            connection = self._connections.connection if reused else None
            self._connections.connection = None  # put back only after a whole answer
            try:
                if connection is None:
                    connection = self._new_connection()
                connection.request("POST", "/", body=body, headers=headers)
                answer = connection.getresponse()
                data = answer.read()
            except BotoCoreError:
                raise  # the connect's own, already botocore's
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                _close(connection)
                if reused:
                    continue  # the idle connection was closed under us: once more on a new one
                raise ConnectionClosedError(endpoint_url=self._url, error=exc) from exc
            except TimeoutError as exc:
                _close(connection)
                raise ReadTimeoutError(endpoint_url=self._url, error=exc) from exc
            except (OSError, http.client.HTTPException) as exc:
                _close(connection)
                raise EndpointConnectionError(endpoint_url=self._url, error=exc) from exc
            if answer.will_close:
                connection.close()
            else:
                self._connections.connection = connection
            return answer.status, answer.msg, data
        raise AssertionError("unreachable")  # pragma: no cover

    def _new_connection(self) -> http.client.HTTPConnection:
        """A connection opened now, with botocore's socket options (TCP_NODELAY) and timeouts."""
        connect_timeout, read_timeout = self._timeouts
        connection: http.client.HTTPConnection
        if self._https:
            if self._ssl is None:
                self._ssl = ssl.create_default_context(cafile=get_cert_path(True))
            connection = http.client.HTTPSConnection(
                self._host, self._port, timeout=connect_timeout, context=self._ssl
            )
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=connect_timeout)
        try:
            connection.connect()
        except TimeoutError as exc:
            raise ConnectTimeoutError(endpoint_url=self._url, error=exc) from exc
        except OSError as exc:
            raise EndpointConnectionError(endpoint_url=self._url, error=exc) from exc
        assert connection.sock is not None
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as botocore's sockets
        connection.sock.settimeout(read_timeout)
        return connection


@functools.cache
def _page_config(service: str, api_version: str, operation: str) -> dict[str, Any]:
    """botocore's pagination of ``operation`` (its tokens and result keys), as its clients load it."""
    model = botocore.session.get_session().get_paginator_model(service, api_version)
    config: dict[str, Any] = model.get_paginator(operation)
    return config


def _protocol(model: Any) -> str:
    """The protocol the client speaks (``resolved_protocol`` in a botocore that knows several a service)."""
    return str(getattr(model, "resolved_protocol", None) or model.metadata["protocol"])


def _json_body(params: Mapping[str, Any], operation: str) -> bytes:
    try:
        return json.dumps(params, separators=(",", ":")).encode()
    except TypeError as exc:  # bytes: a binary attribute value, which needs botocore's base64
        raise TypeError(
            f"{operation}: the lean transport sends no binary values (B, BS) and duetime writes none; "
            f"set {LEAN_ENV}=0 to send them through botocore ({exc})"
        ) from exc


def _close(connection: http.client.HTTPConnection | None) -> None:
    if connection is not None:
        connection.close()
