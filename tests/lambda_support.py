"""Calling the Lambda handlers in functions/ as Lambda does."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class LambdaContext:
    function_name: str = "duetime-test"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:duetime-test"
    aws_request_id: str = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def load_handler(name: str, file: str = "handler") -> ModuleType:
    """functions/<name>/<file>.py, loaded afresh: its decorators read the environment, as at a cold start."""
    spec = importlib.util.spec_from_file_location(f"{name}_{file}", ROOT / "functions" / name / f"{file}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_script(name: str) -> ModuleType:
    """scripts/<name>.py as a module (the repository's tools are files, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def api_request(
    method: str,
    path: str,
    token: str,
    body: str | None = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    api: ModuleType | None = None,
) -> dict[str, Any]:
    """The api function's answer to a request with ``token`` (and ``headers``) that API Gateway passed on
    (``/v1/{proxy+}``); ``api``: the function's module, if not one loaded afresh."""
    event = {
        "httpMethod": method,
        "path": path,
        "resource": "/v1/{proxy+}",
        "pathParameters": {"proxy": path.removeprefix("/v1/")},
        "headers": {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            **(headers or {}),
        },
        "requestContext": {"requestId": "r", "stage": "v1"},
        "queryStringParameters": query or None,
        "body": body,
        "isBase64Encoded": False,
    }
    response: dict[str, Any] = (api or load_handler("api")).handler(event, LambdaContext())
    return response
