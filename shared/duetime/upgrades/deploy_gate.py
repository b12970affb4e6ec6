"""The deploy check as a step of the deploy itself: a CloudFormation custom resource the stack updates
before any function (every function depends on it), whose handler refuses the release being deployed when
the installation's record says no (``deploy_check``). A refused Create or Update fails the stack operation
with the reason, and CloudFormation rolls back before a function changes; a Delete (the stack deleted, or a
release without the gate deployed over it) is always allowed.

``make deploy`` runs the same check before it starts (``duetime system deploy-check``); this one also holds
for a deploy that does not go through it (``cdk deploy`` by hand, a pipeline)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from duetime.ports import InstallationRecord
from duetime.upgrades.operations import deploy_check

log = logging.getLogger(__name__)
PHYSICAL_ID = "duetime-deploy-check"  # one resource for the stack's life: an update never replaces it


@dataclass(frozen=True)
class GateAnswer:
    allowed: bool
    reason: str


def gate(event: dict[str, Any], record: Callable[[], InstallationRecord]) -> GateAnswer:
    """The answer to CloudFormation's ``event`` for the release its ``ResourceProperties`` name (the record
    is read only for a Create or an Update)."""
    if event.get("RequestType") == "Delete":
        return GateAnswer(True, "nothing to check on delete")
    release = str(event.get("ResourceProperties", {}).get("Release", ""))
    if not release:
        return GateAnswer(False, "the deploy check was given no Release")
    refusal = deploy_check(record(), release)
    if refusal is not None:
        return GateAnswer(False, refusal)
    return GateAnswer(True, f"release {release} may be deployed over this installation")


def answer_cloudformation(
    event: dict[str, Any],
    record: Callable[[], InstallationRecord],
    respond: Callable[[dict[str, Any], str, bool, str], object],
) -> GateAnswer:
    """Decide ``event`` and send the answer (``respond``). Whatever goes wrong is answered too, as a failure
    naming it: a request left unanswered holds the stack for an hour."""
    try:
        answer = gate(event, record)
    except Exception as exc:  # the record unreadable: the deploy stops, saying why
        log.exception("the deploy check failed")
        answer = GateAnswer(False, f"the deploy check could not read the installation's record: {exc}")
    respond(event, PHYSICAL_ID, answer.allowed, answer.reason)
    return answer
