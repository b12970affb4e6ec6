"""The API's response shapes (requests are ``JobSpec``). Kept apart so the OpenAPI document is stable.

One module a resource: ``schema_base``, ``job_schemas``, ``run_schemas``, ``team_schemas`` (and
``calendar_schemas``); this module exports every name of the first four.
"""

from duetime.api.job_schemas import (
    MAX_TRIGGER_BODY,
    ExcludedTimeOut,
    JobChangeOut,
    JobHistory,
    JobList,
    JobOut,
    JobPatch,
    LoadMinute,
    LoadOut,
    PreviewOut,
    PreviewRun,
    RunSummary,
    SkippedWallTime,
    TriggerIn,
)
from duetime.api.run_schemas import AuditOut, BackfillOut, FireOut, FiresOut, JobAuditOut, RunList, RunOut
from duetime.api.schema_base import ErrorDetail, ErrorOut, Health, Out
from duetime.api.team_schemas import (
    AwsRoleIn,
    SigningKeyOut,
    SigningKeysOut,
    TeamOut,
    TokenIssued,
    TokenList,
    TokenOut,
)

__all__ = [
    "MAX_TRIGGER_BODY",
    "AuditOut",
    "AwsRoleIn",
    "BackfillOut",
    "ErrorDetail",
    "ErrorOut",
    "ExcludedTimeOut",
    "FireOut",
    "FiresOut",
    "Health",
    "JobAuditOut",
    "JobChangeOut",
    "JobHistory",
    "JobList",
    "JobOut",
    "JobPatch",
    "LoadMinute",
    "LoadOut",
    "Out",
    "PreviewOut",
    "PreviewRun",
    "RunList",
    "RunOut",
    "RunSummary",
    "SigningKeyOut",
    "SigningKeysOut",
    "SkippedWallTime",
    "TeamOut",
    "TokenIssued",
    "TokenList",
    "TokenOut",
    "TriggerIn",
]
