"""A small client for the duetime REST API (used by the CLI)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

import urllib3


class ApiFailure(Exception):
    """The API answered with an error, or could not be reached. ``str()`` is one line for people."""


class DuetimeClient:
    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.pool = urllib3.PoolManager(timeout=urllib3.Timeout(total=timeout), retries=False)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        url = (
            self.url
            + path
            + ("?" + urlencode({k: v for k, v in (query or {}).items() if v is not None}) if query else "")
        )
        all_headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            **(headers or {}),
        }
        try:
            response = self.pool.request(
                method, url, body=json.dumps(body) if body is not None else None, headers=all_headers
            )
        except urllib3.exceptions.HTTPError as exc:
            raise ApiFailure(f"cannot reach {self.url}: {type(exc).__name__}") from exc
        text = response.data.decode() if response.data else ""
        data = json.loads(text) if text else None
        if response.status >= 400:
            error = (data or {}).get("error", {}) if isinstance(data, dict) else {}
            field = f" ({error['field']})" if error.get("field") else ""
            raise ApiFailure(f"HTTP {response.status}: {error.get('message', text)}{field}")
        return data

    def job_path(self, job_id: str, action: str = "") -> str:
        return f"/v1/jobs/{quote(job_id, safe='')}" + (f"/{action}" if action else "")

    def run_path(self, run_id: str, action: str = "") -> str:
        return f"/v1/runs/{quote(run_id, safe='')}" + (f"/{action}" if action else "")
