"""Rows that cannot be read as jobs, quarantined: one bad row is one bad job, not its bucket's.

A due row whose payload the reader refuses (invalid JSON, a required field missing, a wrong type, an
unknown schedule kind) is left out of the read (``ports.JobStore.due_jobs``) and its bucket's other jobs
are claimed as usual. The row itself stays where it is, never deleted: an operator, or the release that
reads it, decides (RELIABILITY.md, runbook). ``Quarantine`` reports each row once per process: a warning
naming its key and the error, never its payload (it may hold a secret), counted in ``UnreadableRows``;
a row read again (the bucket's sweep before it settles, the minute preload) is not reported again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from duetime.ports import UnreadableRow

log = logging.getLogger(__name__)


class Quarantine:
    """The unreadable rows a process has reported, by (job id, due key), the last ``remember`` of them;
    ``keep``, given, is called with the rows each ``note`` reports first (the quarantine record the operator
    reads: ``ports.QuarantineRecord``)."""

    def __init__(
        self, remember: int = 10_000, keep: Callable[[Sequence[UnreadableRow]], None] | None = None
    ) -> None:
        self.remember = remember
        self.keep = keep
        self._seen: dict[tuple[str, str], None] = {}  # insertion-ordered: the oldest forgotten first

    def note(self, rows: Sequence[UnreadableRow]) -> int:
        """Report the rows not reported before (a warning each); how many were new."""
        new: list[UnreadableRow] = []
        for row in rows:
            key = (row.job_id, row.due_key)
            if key in self._seen:
                continue
            self._seen[key] = None
            new.append(row)
            log.warning(
                "unreadable job row quarantined (left in place, its bucket's other jobs claimed): "
                "job %s, partition %02d, bucket %s, due key %s: %s",
                row.job_id,
                row.partition,
                row.bucket,
                row.due_key,
                row.error,
                extra={
                    "unreadable_row": {
                        "job_id": row.job_id,
                        "partition": row.partition,
                        "bucket": row.bucket,
                        "due_key": row.due_key,
                        "error": row.error,
                    }
                },
            )
        while len(self._seen) > self.remember:
            del self._seen[next(iter(self._seen))]
        if new and self.keep is not None:
            try:
                self.keep(new)
            except Exception:  # the record is for the operator: its failure must not stop a sweep
                log.exception("the quarantine record could not keep %d unreadable rows", len(new))
        return len(new)
