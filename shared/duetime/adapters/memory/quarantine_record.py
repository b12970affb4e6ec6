"""The twin's quarantine record (``QuarantineRecord``): rows by (job id, due key), each kept once
(QUARANTINED_ROW_IS_NEW) with the time of its first report, to the whole second. What the twin does not
model: the 30 days after which DynamoDB's TTL forgets a record."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from duetime.adapters.memory.stored import Tables, to_second
from duetime.ports import QuarantinedRow, UnreadableRow


class MemoryQuarantineRecord(Tables):
    """``QuarantineRecord`` in memory (mixed into ``MemoryStore``)."""

    _quarantined: dict[tuple[str, str], QuarantinedRow]

    def record_unreadable(self, rows: Sequence[UnreadableRow], now: datetime) -> None:
        with self.lock:
            for row in rows:
                self._quarantined.setdefault((row.job_id, row.due_key), QuarantinedRow(row, to_second(now)))

    def quarantined_rows(self, limit: int = 1000) -> list[QuarantinedRow]:
        with self.lock:
            kept = list(self._quarantined.values())
        return sorted(kept, key=lambda q: (q.first_seen, q.row.job_id))[:limit]
