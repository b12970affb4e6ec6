"""An installation's life across releases: which releases have run against its tables, the stored format they
may write, and the two checks that keep an upgrade or a rollback from losing a job.

Two phases, as Kubernetes moves a resource to a new storage version. **Deploy** a release: it reads the
format it writes and the one before it, and writes the installation's finalized format (never a newer one),
so the release before it still reads everything, and rolling back is safe. **Finalize** once no older
release can run any more: from then on the release writes its own format, and a rollback past it is refused.

- ``deploy_refusal``: a release may be deployed over an installation finalized at its own format or the one
  before it. Further back, a release in between was never finalized (skipped); further on, the
  installation holds items the release may not read (a rollback past a finalize).
- ``finalize_refusal``: finalize only once every older release's invocations have ended: the release
  finalizing has run for ``DRAIN`` (the longest a function of the release before can still run after the
  deploy that replaced it) and no other release has been seen for as long.

An installation with no record (one that ran releases from before stored formats had a version, or a new
one whose functions have not started yet) is finalized at format 1, the format those releases wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from duetime.domain.stored_format import FIRST_FORMAT, FORMAT, release_format

# The longest an invocation of a replaced function can still run: a worker's 15 minutes (Lambda's most),
# a poller's 135 s, and a minute for the deploy itself to settle.
DRAIN = timedelta(minutes=15) + timedelta(seconds=135) + timedelta(minutes=1)


@dataclass(frozen=True)
class ReleaseSeen:
    """A release whose functions have run against the installation's tables: the first and the last time one
    of them said so (at its cold start, and again every ``SEEN_REFRESH`` while it runs)."""

    release: str
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True)
class Installation:
    """The installation's record of itself (one item of the control table)."""

    finalized_format: int = FIRST_FORMAT
    finalized_release: str | None = None
    finalized_at: datetime | None = None
    releases: tuple[ReleaseSeen, ...] = field(default_factory=tuple)

    def seen(self, release: str) -> ReleaseSeen | None:
        return next((r for r in self.releases if r.release == release), None)


def write_format(installation_format: int, release_format_: int = FORMAT) -> int:
    """The format a release writes: the installation's finalized one, never newer than its own, and never
    older than the one before its own (the oldest it can write: an installation further back skipped a
    finalize, which the deploy check refuses)."""
    return max(min(installation_format, release_format_), release_format_ - 1, FIRST_FORMAT)


def deploy_refusal(installation: Installation, release: str) -> str | None:
    """Why ``release`` may not be deployed over ``installation``, or None when it may."""
    wanted = release_format(release)
    if wanted is None:
        return (
            f"release {release} is unknown to this release's table of formats: deploy it with its own tools"
        )
    have = installation.finalized_format
    by = f" by {installation.finalized_release}" if installation.finalized_release else ""
    if have > wanted:
        return (
            f"rollback refused: the installation was finalized at stored format {have}{by}, and release "
            f"{release} writes and reads format {wanted}. Items written since the finalize may be unreadable "
            "to it. Roll forward instead, or restore the tables to before the finalize "
            "(docs/guide/upgrading.md)."
        )
    if have < wanted - 1:
        return (
            f"upgrade refused: release {release} writes stored format {wanted} and reads formats "
            f"{wanted - 1} and {wanted}, but the installation is finalized at format {have}{by}. Deploy the "
            f"release that writes format {wanted - 1} first, run `duetime system finalize` under it, then "
            f"deploy {release} (docs/guide/upgrading.md)."
        )
    return None


def finalize_refusal(
    installation: Installation, release: str, now: datetime, drain: timedelta = DRAIN
) -> str | None:
    """Why ``release`` may not finalize ``installation`` at ``now``, or None when it may."""
    wanted = release_format(release)
    if wanted is None:
        return f"release {release} is unknown to this release's table of formats"
    if installation.finalized_format > wanted:
        return (
            f"the installation is already finalized at format {installation.finalized_format}, newer than "
            f"{release}'s {wanted}"
        )
    mine = installation.seen(release)
    if mine is None:
        return (
            f"no function of release {release} has run against these tables yet: deploy it, let it run, "
            "then finalize"
        )
    if now < mine.first_seen + drain:
        return (
            f"release {release} first ran at {mine.first_seen:%Y-%m-%d %H:%M:%S}Z; invocations of the "
            f"release before it may run until {mine.first_seen + drain:%H:%M:%S}Z (a worker's 15 minutes, a "
            "poller's 135 s): finalize after that"
        )
    still = [r.release for r in installation.releases if r.release != release and now < r.last_seen + drain]
    if still:
        return (
            f"release {', '.join(sorted(still))} ran within the last {int(drain.total_seconds()) // 60} "
            "minutes: a function of it may still be running (or it was deployed again). Finalize once only "
            f"{release} runs"
        )
    return None
