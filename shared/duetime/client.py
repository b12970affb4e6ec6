"""A client for the duetime REST API: the CLI's, and an SDK for Python users. ``request`` sends any request;
the typed methods return the API's own models (``duetime.api.schemas``)::

    from duetime.client import DuetimeClient
    api = DuetimeClient("http://127.0.0.1:8080", token)
    job = api.put_job("billing/nightly-export", {"name": "nightly export", "schedule": {"cron": "0 2 * * *"},
                                                 "target": {"url": "https://example.com/export"}})
    run = api.trigger(job.id)
    print([r.status for r in api.runs(job.id)])
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import urllib3

from duetime.domain.stored_format import STORED

if TYPE_CHECKING:
    from duetime.api.schemas import JobOut, PreviewOut, RunOut


class ApiFailure(Exception):
    """The API answered with an error (``status``, and the ``field`` it names, if any), or could not be
    reached (``status`` None). ``str()`` is one line for people."""

    def __init__(self, message: str, status: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.field = field


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
            raise ApiFailure(
                f"HTTP {response.status}: {error.get('message', text)}{field}",
                response.status,
                error.get("field"),
            )
        return data

    def job_path(self, job_id: str, action: str = "") -> str:
        return f"/v1/jobs/{quote(job_id, safe='')}" + (f"/{action}" if action else "")

    def run_path(self, run_id: str, action: str = "") -> str:
        return f"/v1/runs/{quote(run_id, safe='')}" + (f"/{action}" if action else "")

    # --- typed: the API's models ----------------------------------------------------------------------

    def create_job(self, spec: Mapping[str, Any], idempotency_key: str | None = None) -> JobOut:
        """``POST /v1/jobs``: a new job (``spec`` as the API takes it)."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return _job(self.request("POST", "/v1/jobs", dict(spec), headers=headers))

    def get_job(self, job_id: str) -> JobOut:
        return _job(self.request("GET", self.job_path(job_id)))

    def jobs(self, label: str | None = None, q: str | None = None) -> Iterator[JobOut]:
        """Every job of the team (``label``/``q`` as ``GET /v1/jobs`` filters), page after page."""
        cursor: str | None = None
        while True:
            page = self.request(
                "GET", "/v1/jobs", query={"limit": 100, "cursor": cursor, "label": label, "q": q}
            )
            yield from (_job(job) for job in page["jobs"])
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def update_job(self, job_id: str, changes: Mapping[str, Any], if_match: str | None = None) -> JobOut:
        """``PATCH``: the fields of ``changes``; with ``if_match`` (an ETag read), only if unchanged since."""
        headers = {"If-Match": if_match} if if_match else None
        return _job(self.request("PATCH", self.job_path(job_id), dict(changes), headers=headers))

    def delete_job(self, job_id: str, if_match: str | None = None) -> None:
        self.request("DELETE", self.job_path(job_id), headers={"If-Match": if_match} if if_match else None)

    def job_by_key(self, key: str) -> JobOut:
        return _job(self.request("GET", self.key_path(key)))

    def put_job(self, key: str, spec: Mapping[str, Any], if_match: str | None = None) -> JobOut:
        """``PUT /v1/jobs/by-key/{key}``: create the job of ``key`` or replace it whole."""
        headers = {"If-Match": if_match} if if_match else None
        return _job(self.request("PUT", self.key_path(key), dict(spec), headers=headers))

    def delete_job_by_key(self, key: str, if_match: str | None = None) -> None:
        self.request("DELETE", self.key_path(key), headers={"If-Match": if_match} if if_match else None)

    def trigger(self, job_id: str, body: Any = None) -> RunOut:
        from duetime.api.schemas import RunOut

        sent = {"body": body} if body is not None else None
        answer = self.request("POST", self.job_path(job_id, "trigger"), sent)
        return RunOut.model_validate(answer, context=STORED)

    def runs(self, job_id: str, limit: int = 50) -> list[RunOut]:
        """The job's latest runs, newest first."""
        from duetime.api.schemas import RunOut

        page = self.request("GET", self.job_path(job_id, "runs"), query={"limit": limit})
        return [RunOut.model_validate(run, context=STORED) for run in page["runs"]]

    def get_run(self, run_id: str) -> RunOut:
        from duetime.api.schemas import RunOut

        return RunOut.model_validate(self.request("GET", self.run_path(run_id)), context=STORED)

    def preview(self, job_id: str, count: int = 10) -> PreviewOut:
        from duetime.api.schemas import PreviewOut

        return PreviewOut.model_validate(
            self.request("GET", self.job_path(job_id, "preview"), query={"count": count}), context=STORED
        )

    def key_path(self, key: str) -> str:
        """A key's path: its one or two segments, each quoted."""
        return "/v1/jobs/by-key/" + "/".join(quote(part, safe="") for part in key.split("/"))


def _job(data: Any) -> JobOut:
    from duetime.api.schemas import JobOut  # the API's models: loaded by the calls that return them

    return JobOut.model_validate(data, context=STORED)  # a later server's fields ignored
