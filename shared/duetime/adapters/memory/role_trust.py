"""The twin's STS, for the role trust check (``duetime.ports.RoleTrustProbe``).

It holds the trust policies as two sets of role ARNs: those that let duetime in with any external id
(``admits_any_id``) and those STS cannot be asked about now (``unanswered``, as a throttle or a network
error); every other role requires its team's id, so a wrong one is refused. Each role asked is kept
(``asked``), so a test can tell which id and session tag went out. What it does not model: IAM itself (a
trust policy's principals and conditions), which only AWS evaluates (LocalStack does not).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from duetime.ports import AwsRole, RoleTrustUnknown


@dataclass
class MemoryRoleTrust:
    """``RoleTrustProbe`` in memory."""

    admits_any_id: set[str] = field(default_factory=set)
    unanswered: set[str] = field(default_factory=set)
    asked: list[AwsRole] = field(default_factory=list)

    def admits_a_wrong_external_id(self, role: AwsRole) -> bool:
        self.asked.append(role)
        if role.role_arn in self.unanswered:
            raise RoleTrustUnknown("STS answered Throttling")
        return role.role_arn in self.admits_any_id
