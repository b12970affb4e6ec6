"""Jobs as code: a file of jobs (``duetime apply -f``) and the plan that takes a team's jobs to what its files
say. Pure: files come in as text, the team's jobs as the API shows them, the environment as a mapping.

A file (YAML or JSON) holds ``managed_by: <name>`` and ``jobs:``, a list of job specs as the API takes them,
each with its ``key``. Header values may be ``${VAR}``: secrets come from the environment, never from the
file, and only from the variables the person applying names: those whose name starts with
``DUETIME_SECRET_``, and those named with ``--secret-env`` (so one edit to a reviewed file cannot send a CI's
cloud keys or its duetime token to a URL the file names). An applied job carries ``managed_by`` and
``applied_digest`` = ``<shape>.<content>``:

- *shape*: a digest of the job as answers show it (secrets redacted), without the two fields; a job whose
  shape differs from the one recorded was edited elsewhere since it was applied (**drift**);
- *content*: a digest of the job with its secrets; the same file with the same environment gives the same
  content, so a second apply of it finds every job **unchanged**, and a secret that changed in the
  environment is an update even though answers never show it.

The plan per key: **create** (no job has it), **update** (with the fields that change), **unchanged**,
**drift** (edited elsewhere since the last apply, or managed under another name: overwritten only with
``--force``), **delete** (a job of the file's ``managed_by`` that no file names any more: only with
``--prune``), and **kept** (such a job without ``--prune``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from duetime.domain.errors import field_path
from duetime.domain.models import MANAGED_BY_PATTERN, JobSpec

MANAGED_FIELDS = frozenset({"managed_by", "applied_digest"})
MAX_FILE_JOBS = 10_000  # a team's job quota's default
SECRET_PREFIX = "DUETIME_SECRET_"  # variables of this name are filled without being named
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV = re.compile(r"\$\{(" + VARIABLE_NAME.pattern + r")\}")


class FileProblem(ValueError):
    """A jobs file that cannot be applied, with where (``<file>: jobs.3.target.url: ...``)."""


class JobFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    managed_by: str = Field(pattern=MANAGED_BY_PATTERN)
    jobs: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_FILE_JOBS)


def read_job_file(text: str, source: str) -> JobFile:
    """A jobs file's text (YAML, or JSON, which YAML reads too) as a ``JobFile``; every job has a key, and no
    key repeats. Raises ``FileProblem`` naming the file and the field."""
    import yaml  # the CLI's alone

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FileProblem(f"{source}: not YAML or JSON: {exc}") from exc
    try:
        parsed = JobFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise FileProblem(f"{source}: {field_path(tuple(first['loc'])) or 'file'}: {first['msg']}") from exc
    seen: set[str] = set()
    for index, job in enumerate(parsed.jobs):
        key = job.get("key")
        if not isinstance(key, str) or not key:
            raise FileProblem(f"{source}: jobs.{index}.key: every job of a file has a key")
        if key in seen:
            raise FileProblem(f"{source}: jobs.{index}.key: key {key!r} is named twice")
        seen.add(key)
    return parsed


def fillable(variable: str, named: Collection[str]) -> bool:
    """Whether an apply fills ``${variable}``: its name starts with ``DUETIME_SECRET_``, or the person
    applying named it (``named``: ``--secret-env``)."""
    return variable.startswith(SECRET_PREFIX) or variable in named


def with_secrets(
    job: dict[str, Any], env: Mapping[str, str], where: str, named: Collection[str] = ()
) -> dict[str, Any]:
    """``job`` with every ``${VAR}`` in its target's header values replaced by the environment's value.
    ``FileProblem`` naming the variable, the header and the job for a variable that is not ``fillable`` (the
    environment's other variables are never read) or not set."""
    target = job.get("target")
    if not isinstance(target, dict) or not isinstance(target.get("headers"), dict):
        return job
    headers: dict[str, Any] = {}
    for name, value in target["headers"].items():
        if isinstance(value, str):
            for variable in _ENV.findall(value):
                at = f"{where}.target.headers.{name} (job {job.get('key')!r}): ${{{variable}}}"
                if not fillable(variable, named):
                    raise FileProblem(
                        f"{at} is not filled: an apply reads only {SECRET_PREFIX}* variables and those "
                        f"named with --secret-env (--secret-env {variable} sends this one to the target)"
                    )
                if variable not in env:
                    raise FileProblem(f"{at} is not set in the environment")
            value = _ENV.sub(lambda match: env[match.group(1)], value)
        headers[name] = value
    return {**job, "target": {**target, "headers": headers}}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _unmanaged(spec: JobSpec) -> JobSpec:
    return spec.model_copy(update={"managed_by": None, "applied_digest": None})


def shape_digest(spec: JobSpec) -> str:
    """The digest of the job as answers show it (secrets redacted), without the apply's own fields."""
    return _digest(_unmanaged(spec).redacted().model_dump_json())


def applied_digest(spec: JobSpec) -> str:
    """``<shape>.<content>`` of a job about to be applied (``spec`` holds its secrets)."""
    return f"{shape_digest(spec)}.{_digest(_unmanaged(spec).model_dump_json())}"


@dataclass(frozen=True)
class DesiredJob:
    key: str
    spec: JobSpec  # validated, with its secrets, ``managed_by`` and ``applied_digest`` set
    source: str  # ``<file>: jobs.<i>``


def desired_jobs(
    files: Sequence[tuple[JobFile, str]],
    env: Mapping[str, str],
    now: datetime,
    named: Collection[str] = (),
) -> list[DesiredJob]:
    """The jobs ``files`` (each with its name) ask for, validated as the API validates a job (at ``now``),
    secrets from ``env`` (the variables ``fillable`` with ``named``). ``FileProblem`` for the first that is
    not a valid job, a variable not to be filled or not set, or a key two files name."""
    found: dict[str, DesiredJob] = {}
    for file, source in files:
        for index, job in enumerate(file.jobs):
            where = f"{source}: jobs.{index}"
            body = with_secrets(job, env, where, named)
            try:
                spec = JobSpec.model_validate({**body, "managed_by": file.managed_by}, context={"now": now})
            except ValidationError as exc:
                first = exc.errors()[0]
                message = str(first["msg"]).removeprefix("Value error, ")
                raise FileProblem(f"{where}.{field_path(tuple(first['loc']))}: {message}") from exc
            assert spec.key is not None
            if spec.key in found:
                raise FileProblem(f"{where}.key: key {spec.key!r} is named in {found[spec.key].source} too")
            found[spec.key] = DesiredJob(
                spec.key, spec.model_copy(update={"applied_digest": applied_digest(spec)}), where
            )
    return list(found.values())


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"
    DRIFT = "drift"
    DELETE = "delete"
    KEEP = "keep"


@dataclass(frozen=True)
class FieldChange:
    path: str
    before: Any
    after: Any


@dataclass(frozen=True)
class PlanItem:
    action: Action
    key: str
    job_id: str | None = None  # an existing job's
    etag: str | None = None  # an existing job's, as read: the write's If-Match
    desired: JobSpec | None = None
    changes: tuple[FieldChange, ...] = ()
    why: str = ""  # drift: what it is; update: "secret values changed" when no shown field did


@dataclass(frozen=True)
class Plan:
    items: tuple[PlanItem, ...] = field(default_factory=tuple)

    def of(self, *actions: Action) -> list[PlanItem]:
        return [item for item in self.items if item.action in actions]

    @property
    def changes(self) -> list[PlanItem]:
        """What an apply writes (drift included: with ``--force``)."""
        return self.of(Action.CREATE, Action.UPDATE, Action.DRIFT, Action.DELETE)


def shown_spec(job: Mapping[str, Any]) -> JobSpec:
    """A job as the API answered it (``JobOut``), as a spec (its secrets shown redacted)."""
    return JobSpec.model_validate(
        {k: v for k, v in job.items() if k in JobSpec.model_fields}, context={"stored": True}
    )


def make_plan(
    desired: Sequence[DesiredJob],
    existing: Iterable[Mapping[str, Any]],
    managed_by: Iterable[str],
    prune: bool,
) -> Plan:
    """The plan from the team's jobs (``existing``, as the API shows them) to ``desired``; the jobs of the
    ``managed_by`` names that ``desired`` no longer holds are deleted with ``prune``, else kept."""
    by_key = {job["key"]: job for job in existing if job.get("key")}
    wanted = {job.key for job in desired}
    names = set(managed_by)
    items = [_item(job, by_key.get(job.key)) for job in desired]
    for key, job in sorted(by_key.items()):
        if key not in wanted and job.get("managed_by") in names:
            action = Action.DELETE if prune else Action.KEEP
            items.append(PlanItem(action, key, job["id"], job.get("etag")))
    return Plan(tuple(items))


def _item(job: DesiredJob, existing: Mapping[str, Any] | None) -> PlanItem:
    if existing is None:
        return PlanItem(Action.CREATE, job.key, desired=job.spec)
    shown = shown_spec(existing)
    recorded = shown.applied_digest
    changes = tuple(_diff(_fields(shown), _fields(job.spec.redacted())))
    base = PlanItem(Action.UPDATE, job.key, existing["id"], existing.get("etag"), job.spec, changes)
    if shown.managed_by is not None and shown.managed_by != job.spec.managed_by:
        return _replace(base, Action.DRIFT, f"managed by {shown.managed_by!r}, not {job.spec.managed_by!r}")
    if recorded is not None and shape_digest(shown) != recorded.split(".")[0]:
        return _replace(base, Action.DRIFT, "edited since it was last applied")
    if recorded == job.spec.applied_digest and shown.managed_by == job.spec.managed_by:
        return _replace(base, Action.UNCHANGED, "")
    if not changes:
        why = "taken under management" if shown.managed_by is None else "secret values changed"
        return _replace(base, Action.UPDATE, why)
    return base


def _replace(item: PlanItem, action: Action, why: str) -> PlanItem:
    return PlanItem(action, item.key, item.job_id, item.etag, item.desired, item.changes, why)


def _fields(spec: JobSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", exclude=set(MANAGED_FIELDS))


def _diff(before: Any, after: Any, path: str = "") -> Iterable[FieldChange]:
    """The leaves that differ between two JSON values, by dotted path (lists compared whole)."""
    if isinstance(before, dict) and isinstance(after, dict):
        for name in sorted(set(before) | set(after)):
            yield from _diff(before.get(name), after.get(name), f"{path}.{name}".lstrip("."))
    elif before != after:
        yield FieldChange(path, before, after)
