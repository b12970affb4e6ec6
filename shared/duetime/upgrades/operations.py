"""The operator's steps of an upgrade (docs/guide/upgrading.md): look at the installation, check a deploy
before it replaces the functions, and finalize once the release before can no longer run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from duetime.domain.installation import DRAIN, Installation, deploy_refusal, finalize_refusal, write_format
from duetime.domain.stored_format import FORMAT, release_format
from duetime.domain.timeutil import iso_z
from duetime.ports import InstallationRecord


@dataclass(frozen=True)
class Finalized:
    """What a finalize did: ``done`` with the format now written, or ``refusal`` saying why not."""

    done: bool
    stored_format: int
    refusal: str | None = None


def finalize(record: InstallationRecord, release: str, now: datetime, force: bool = False) -> Finalized:
    """Finalize the installation at ``release``'s format (INSTALLATION_FINALIZED_AS_READ). Refused while an
    older release may still run (``finalize_refusal``) unless ``force``; a finalize that another one beat
    is refused with what it found."""
    installation = record.read_installation()
    wanted = release_format(release)
    if wanted is None:
        return Finalized(
            False, installation.finalized_format, f"release {release} has no known stored format"
        )
    if installation.finalized_format == wanted:
        return Finalized(True, wanted)  # again: nothing to do
    refusal = finalize_refusal(installation, release, now)
    if refusal is not None and not (force and installation.finalized_format < wanted):
        return Finalized(False, installation.finalized_format, refusal)
    if not record.finalize_installation(wanted, release, now, was=installation.finalized_format):
        now_at = record.read_installation().finalized_format
        return Finalized(
            now_at == wanted, now_at, None if now_at == wanted else "another finalize came first"
        )
    return Finalized(True, wanted)


def deploy_check(record: InstallationRecord, release: str) -> str | None:
    """Why ``release`` may not be deployed over the installation, or None."""
    return deploy_refusal(record.read_installation(), release)


def describe(installation: Installation, release: str, now: datetime) -> dict[str, Any]:
    """The installation as the operator reads it (``duetime system installation``)."""
    refusal = finalize_refusal(installation, release, now)
    return {
        "finalized_format": installation.finalized_format,
        "finalized_release": installation.finalized_release,
        "finalized_at": iso_z(installation.finalized_at) if installation.finalized_at else None,
        "releases": [
            {"release": r.release, "first_seen": iso_z(r.first_seen), "last_seen": iso_z(r.last_seen)}
            for r in installation.releases
        ],
        "this_release": {
            "release": release,
            "format": release_format(release) or FORMAT,
            "writes_format": write_format(installation.finalized_format, release_format(release) or FORMAT),
        },
        "finalize": (
            "done"
            if installation.finalized_format >= (release_format(release) or FORMAT)
            else ("ready" if refusal is None else f"not yet: {refusal}")
        ),
        "drain_seconds": int(DRAIN.total_seconds()),
    }
