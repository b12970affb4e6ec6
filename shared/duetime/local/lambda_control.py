"""The sliver of Lambda's API that ``duetime local``'s gateway answers for the functions it runs: a
function's reserved concurrency (``Put``/``Get``/``DeleteFunctionConcurrency``, at the paths and in the shapes
of the Lambda API reference), so ``duetime system pollers stop --local`` stops the local pollers as it stops
a stack's (``duetime.adapters.aws.function_switch``). A reserved concurrency of 0 throttles every invocation
of the function (``LocalFunction``); any other figure is kept and reported but not enforced locally.

Like the rest of ``duetime local`` (and LocalStack), the gateway listens on 127.0.0.1 only and checks no
signature: it is a development stack, not a deployment."""

from __future__ import annotations

import json
import re

from duetime.local.demo_target import Answer
from duetime.local.lambda_sandbox import registered

# /<API version>/functions/<name>/concurrency: Put and Delete under 2017-10-31, Get under 2019-09-30.
CONCURRENCY_PATH = re.compile(r"^/(2017-10-31|2019-09-30)/functions/([^/]+)/concurrency$")
_JSON = {"Content-Type": "application/json"}


def _error(status: int, kind: str, message: str) -> Answer:
    return status, json.dumps({"Type": "User", "message": message}), {**_JSON, "x-amzn-ErrorType": kind}


def answer_lambda_control(method: str, path: str, body: str) -> Answer | None:
    """The answer to a Lambda concurrency request; None when ``path`` is not one."""
    matched = CONCURRENCY_PATH.match(path)
    if matched is None:
        return None
    function = registered(matched.group(2))
    if function is None:
        return _error(404, "ResourceNotFoundException", f"Function not found: {matched.group(2)}")
    if method == "GET":
        reserved = function.reserved_concurrency
        return 200, json.dumps({} if reserved is None else {"ReservedConcurrentExecutions": reserved}), _JSON
    if method == "DELETE":
        function.reserved_concurrency = None
        return 204, "", {}
    if method == "PUT":
        try:
            value = json.loads(body or "{}").get("ReservedConcurrentExecutions")
        except (ValueError, AttributeError):
            value = None
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return _error(
                400, "InvalidParameterValueException", "ReservedConcurrentExecutions: an integer >= 0"
            )
        function.reserved_concurrency = value
        return 200, json.dumps({"ReservedConcurrentExecutions": value}), _JSON
    return _error(405, "MethodNotAllowed", f"{method} is not allowed on {path}")
