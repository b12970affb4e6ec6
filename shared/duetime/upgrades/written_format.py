"""The stored format a process writes (``duetime.domain.installation``: the installation's finalized format,
at most its release's), asked of the installation's record at the first write and again every ``refresh``.

Each ask also says that this release runs (``record_release``): one write a process every few minutes, which
is how the installation knows which releases write to its tables and when the last of an older one ran.
A new installation (its tables hold nothing, and it was never finalized) is finalized at this release's
format at the first ask: nothing older ever wrote to it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from duetime.domain.installation import write_format
from duetime.domain.stored_format import FIRST_FORMAT, FORMAT
from duetime.ports import InstallationRecord

log = logging.getLogger(__name__)

# How long a process writes the format it last read before asking again: after a finalize, every process
# writes the new format within this (the old one meanwhile, which the release reads).
REFRESH = timedelta(minutes=5)


class WrittenFormat:
    """A callable: the format to write now. Thread-safe; the record is asked by one caller at a time."""

    def __init__(
        self,
        record: InstallationRecord,
        release: str,
        now: Callable[[], datetime],
        release_format: int = FORMAT,
        refresh: timedelta = REFRESH,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.record = record
        self.release = release
        self.now = now
        self.release_format = release_format
        self.refresh_seconds = refresh.total_seconds()
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._format: int | None = None
        self._asked_at = 0.0
        self._new = True  # until the record or the tables say otherwise (never again after)

    def __call__(self) -> int:
        """The format to write. An ask that fails (the record throttled, unreachable) never fails the write
        it was made for: the format last read stands, or format 1 (which every release reads) before any,
        and the record is asked again at the next refresh."""
        with self._lock:
            if self._format is None or self.monotonic() - self._asked_at >= self.refresh_seconds:
                self._asked_at = self.monotonic()
                try:
                    self._format = self._ask()
                except Exception:
                    log.warning(
                        "the installation's record could not be read: writing format %s",
                        self._format or 1,
                        exc_info=True,
                    )
                    self._format = self._format or FIRST_FORMAT
            return self._format

    def _ask(self) -> int:
        installation = self.record.record_release(self.release, self.now())
        self._new = self._new and installation.finalized_release is None and self.record.holds_nothing()
        if self._new:
            self.record.start_installation(self.release_format, self.release, self.now())
            installation = self.record.read_installation()
            self._new = False
        return write_format(installation.finalized_format, self.release_format)
