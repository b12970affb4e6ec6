"""The interfaces the logic depends on. Their docstrings are the contract every adapter keeps.

A lost race is a normal outcome: methods that guard a state change report it by returning ``False`` or
``None``, never by raising. ``now`` is always the store's clock.

One module a concern: ``jobs``, ``runs``, ``notifications``, ``leases``, ``installation``, ``catalog``,
``queue``, ``capacity``, ``targets``, ``reconciler``. Import from here or from the module.
"""

from duetime.ports.capacity import (
    ROLLING_DAY,
    SWITCHES_TO_ON_DEMAND_PER_DAY,
    ProvisionedEventPollers,
    ProvisionedWorkers,
    SwitchLimitReached,
    TableCapacityModes,
)
from duetime.ports.catalog import CalendarReader, CalendarStore, Catalog, TeamCatalog, TeamStore
from duetime.ports.installation import InstallationRecord
from duetime.ports.jobs import (
    ClaimOutcome,
    DueReads,
    DueRow,
    JobStore,
    MarkRebuild,
    QuarantinedRow,
    QuarantineRecord,
    UnreadableRow,
    unreadable_error,
)
from duetime.ports.leases import PollerLease, PollerLeaseStore
from duetime.ports.notifications import Alert, AlertSink, Notice, NotificationOutbox, PendingNotification
from duetime.ports.queue import RunBacklog, RunMessage, RunQueue
from duetime.ports.reconciler import ReconcilerRecord, ReconcilerReport
from duetime.ports.runs import (
    DeadlineStore,
    DeadlineWatch,
    JobAndRunStore,
    ReapCandidate,
    ResultWrite,
    RunStore,
    WaitingRuns,
)
from duetime.ports.targets import (
    AwsRole,
    AwsTargetCall,
    AwsTargetCaller,
    RoleTrustProbe,
    RoleTrustUnknown,
    TargetCaller,
    TargetRequest,
    TargetResponse,
)

__all__ = [
    "ROLLING_DAY",
    "SWITCHES_TO_ON_DEMAND_PER_DAY",
    "Alert",
    "AlertSink",
    "AwsRole",
    "AwsTargetCall",
    "AwsTargetCaller",
    "CalendarReader",
    "CalendarStore",
    "Catalog",
    "ClaimOutcome",
    "DeadlineStore",
    "DeadlineWatch",
    "DueReads",
    "DueRow",
    "InstallationRecord",
    "JobAndRunStore",
    "JobStore",
    "MarkRebuild",
    "Notice",
    "NotificationOutbox",
    "PendingNotification",
    "PollerLease",
    "PollerLeaseStore",
    "ProvisionedEventPollers",
    "ProvisionedWorkers",
    "QuarantineRecord",
    "QuarantinedRow",
    "ReapCandidate",
    "ReconcilerRecord",
    "ReconcilerReport",
    "ResultWrite",
    "RoleTrustProbe",
    "RoleTrustUnknown",
    "RunBacklog",
    "RunMessage",
    "RunQueue",
    "RunStore",
    "SwitchLimitReached",
    "TableCapacityModes",
    "TargetCaller",
    "TargetRequest",
    "TargetResponse",
    "TeamCatalog",
    "TeamStore",
    "UnreadableRow",
    "WaitingRuns",
    "unreadable_error",
]
