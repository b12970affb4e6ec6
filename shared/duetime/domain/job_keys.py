"""A job's key (a team-unique name a client chooses, e.g. ``billing/nightly-export``) and its ETag.

The key is what jobs-as-code files name a job by (``PUT /v1/jobs/by-key/{key}``): set on create or later,
once, and never changed. It is stored with the job and, for uniqueness, as an item of its own written in the
job's transaction (JOB_KEY_IS_FREE).

The ETag is a hash of what the team wrote (the job's spec, as answers show it with secrets redacted, and
whether it is paused): it changes with every edit and with nothing else. A claim moves the job's schedule
(``JobState.version``) every time it runs, so the version would answer "changed" for a minutely job between
any read and write; the ETag does not. ``If-Match`` compares with it; the write itself is then conditioned
on the job version read with it (JOB_VERSION_IS), so a check and its write are one step.
"""

from __future__ import annotations

import hashlib

from duetime.domain.models import JOB_KEY_PATTERN, JobSpec

__all__ = ["JOB_KEY_PATTERN", "etag_of", "if_match_holds"]  # JOB_KEY_PATTERN: one or two path segments


def etag_of(spec: JobSpec) -> str:
    """The job's ETag, quoted as HTTP writes it (``"3f1a..."``)."""
    shown = spec.redacted().model_dump_json(include=set(JobSpec.model_fields))
    return '"' + hashlib.sha256(shown.encode()).hexdigest()[:20] + '"'


def if_match_holds(if_match: str | None, etag: str) -> bool:
    """Whether an ``If-Match`` header allows a write to a job whose ETag is ``etag``: absent, ``*``, or a
    list naming it (quoted or not; ``W/`` weak tags compare by their value)."""
    if if_match is None or if_match.strip() == "*":
        return True
    wanted = etag.strip('"')
    return any(tag.strip().removeprefix("W/").strip('"') == wanted for tag in if_match.split(","))
