"""Teams, their tokens and the operator's audit trail, in the control table.

Rows (``pk`` / ``sk``):

- ``team#<id>`` / ``team``: the team's settings (``team``, the JSON of ``duetime.domain.models.Team``), its
  ``revision`` (one up with every administrative change) and the counts its job writes keep (``job_count``,
  ``exact_jobs``; see ``catalog.py``);
- ``token#<sha256 of the token>`` / ``token``: which team a token authenticates, its name, scope and
  ``generation``: a token authenticates only while its generation is the team's ``token_generation``, so
  rotating the team's tokens is one transaction (the team's generation goes up, the new token's rows are
  written) and every older token stops working with it;
- ``tokens#<id>`` / ``<token id>``: the same token in the team's list (``team_tokens``, one Query). Both rows
  are written and deleted together, in the transaction that bumps the team's revision and writes the audit
  event, so issuing and revoking are audited and serialised like every other change of the team. (Tokens
  issued before tokens had names have no list row: ``duetime teams rotate-token`` retires them.);
- ``teams`` / ``<id>``: the directory ``duetime teams list`` reads with one Query (never a Scan);
- ``audit#<id>`` / ``<revision, 12 digits>``: one row per administrative change, the revision it made, written
  in the same transaction as the change, kept 90 days (TTL ``ttl``). No secret or token is ever written there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, number_attribute, stamped, string_attribute
from duetime.adapters.dynamodb.conditional import transaction_committed
from duetime.adapters.dynamodb.reads import batch_get, read_team, team_key
from duetime.adapters.dynamodb.tables import TableNames
from duetime.domain.catalog import AuditEvent
from duetime.domain.models import Team
from duetime.domain.stored_format import FIRST_FORMAT, STORED
from duetime.domain.timeutil import iso_z
from duetime.domain.tokens import LEGACY_TOKEN_NAME, ApiToken, TokenScope

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

AUDIT_KEPT = timedelta(days=90)
DIRECTORY = "teams"

__all__ = ["AUDIT_KEPT", "DIRECTORY", "AuditEvent", "TeamRecords"]  # AuditEvent: from duetime.domain.catalog


class TeamRecords:
    """The team rows of the control table. ``DynamoCatalog`` is one (it adds jobs and runs)."""

    client: DynamoDBClient
    names: TableNames
    write_format: Callable[[], int]  # the stored format a new item is written in (``DynamoCatalog``)

    def create_team(self, team: Team, token: ApiToken, audit: AuditEvent | None = None) -> bool:
        """Write a new team, its first token, its directory row (and the audit event) together; False when the
        team id is taken (TEAM_IS_NEW)."""
        items: list[TransactWriteItemTypeDef] = [
            self._put_new(
                {
                    **team_key(team.team_id),
                    "team": string_attribute(team.model_dump_json()),
                    "revision": number_attribute(1),
                    "exact_jobs": number_attribute(0),
                    "job_count": number_attribute(0),
                }
            ),
            *self._token_puts(token),
            self._put_new({"pk": string_attribute(DIRECTORY), "sk": string_attribute(team.team_id)}),
        ]
        if audit is not None:
            items.append(self._audit_put(audit, 1))
        return self._transact(items)

    def token_record(self, token_hash: str) -> ApiToken | None:
        """The token whose SHA-256 is ``token_hash``, if it is a token (issued, not revoked)."""
        item = self.client.get_item(
            TableName=self.names.control,
            Key={"pk": string_attribute(f"token#{token_hash}"), "sk": string_attribute("token")},
        ).get("Item")
        return _token(item) if item else None

    def team_tokens(self, team_id: str) -> list[ApiToken]:
        """Every listed token of the team, of any generation (the caller keeps the current ones), read
        consistently: what issuing and revoking start from."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self.names.control,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": string_attribute(f"tokens#{team_id}")},
            ConsistentRead=True,
        )
        return [_token(item) for page in pages for item in page.get("Items", [])]

    def get_team(self, team_id: str) -> Team | None:
        return read_team(self.client, self.names, team_id)

    def team_revision(self, team_id: str) -> tuple[Team, int] | None:
        """The team and its revision, read consistently: what an administrative change starts from."""
        item = self.client.get_item(
            TableName=self.names.control, Key=team_key(team_id), ConsistentRead=True
        ).get("Item")
        if not item:
            return None
        revision = int(item["revision"]["N"]) if "revision" in item else 0
        return Team.model_validate_json(item["team"]["S"], context=STORED), revision

    def list_teams(self) -> list[Team]:
        """Every team in the directory, by id: one Query for the ids, BatchGetItem for the teams."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self.names.control,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": string_attribute(DIRECTORY)},
        )
        ids = [item["sk"]["S"] for page in pages for item in page.get("Items", [])]
        items = batch_get(self.client, self.names.control, [team_key(i) for i in ids])
        teams = [Team.model_validate_json(item["team"]["S"], context=STORED) for item in items]
        return sorted(teams, key=lambda team: team.team_id)

    def replace_team(
        self,
        before: Team,
        revision: int,
        after: Team,
        audit: AuditEvent,
        issue: ApiToken | None = None,
        revoke: ApiToken | None = None,
    ) -> bool:
        """Write ``after`` over ``before`` if the stored team is still ``before`` (TEAM_UNCHANGED_SINCE_READ),
        as revision ``revision + 1``, with its audit row (which must be new: a change that raced another one
        back to the same settings, or another token's issue or revocation, is caught there), the rows of a
        token issued (``issue``) and the deletion of a token revoked (``revoke``, TOKEN_EXISTS). False on a
        lost race."""
        stored_format = self.write_format()
        items: list[TransactWriteItemTypeDef] = [
            {
                "Update": {
                    "TableName": self.names.control,
                    "Key": team_key(before.team_id),
                    "UpdateExpression": "SET team = :after, revision = :revision, fmt = :fmt"
                    if stored_format > FIRST_FORMAT
                    else "SET team = :after, revision = :revision",
                    "ConditionExpression": c.TEAM_UNCHANGED_SINCE_READ.expression,
                    "ExpressionAttributeValues": {
                        ":after": string_attribute(after.model_dump_json()),
                        ":before": string_attribute(before.model_dump_json()),
                        ":revision": number_attribute(revision + 1),
                        **({":fmt": number_attribute(stored_format)} if stored_format > FIRST_FORMAT else {}),
                    },
                }
            },
            self._audit_put(audit, revision + 1),
        ]
        if issue is not None:
            items += self._token_puts(issue)
        if revoke is not None:
            items += [
                {
                    "Delete": {
                        "TableName": self.names.control,
                        "Key": key,
                        "ConditionExpression": c.TOKEN_EXISTS.expression,
                    }
                }
                for key in _token_keys(revoke)
            ]
        return self._transact(items)

    def audit_events(self, team_id: str, limit: int = 100) -> list[AuditEvent]:
        """The team's administrative changes of the last 90 days, newest first."""
        page = self.client.query(
            TableName=self.names.control,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": string_attribute(f"audit#{team_id}")},
            ScanIndexForward=False,
            Limit=limit,
        )
        return [
            AuditEvent(
                team_id=team_id,
                action=item["action"]["S"],
                at=datetime.fromisoformat(item["at"]["S"]),
                actor=item["actor"]["S"],
                detail=json.loads(item["detail"]["S"]),
            )
            for item in page.get("Items", [])
        ]

    # --- items ------------------------------------------------------------------------------------------

    def _token_puts(self, token: ApiToken) -> list[TransactWriteItemTypeDef]:
        """The token's row (looked up by its hash) and its row in the team's list, both new (TEAM_IS_NEW)."""
        fields: Item = {
            "team_id": string_attribute(token.team_id),
            "token_hash": string_attribute(token.token_hash),
            "generation": number_attribute(token.generation),
            "name": string_attribute(token.name),
            "scope": string_attribute(token.scope),
            "created_by": string_attribute(token.created_by or "unknown"),
            **({"created_at": string_attribute(iso_z(token.created_at))} if token.created_at else {}),
        }
        return [self._put_new({**key, **fields}) for key in _token_keys(token)]

    def _put_new(self, item: Item) -> TransactWriteItemTypeDef:
        return {
            "Put": {
                "TableName": self.names.control,
                "Item": stamped(item, self.write_format()),
                "ConditionExpression": c.TEAM_IS_NEW.expression,
            }
        }

    def _audit_put(self, event: AuditEvent, revision: int) -> TransactWriteItemTypeDef:
        return self._put_new(
            {
                "pk": string_attribute(f"audit#{event.team_id}"),
                "sk": string_attribute(f"{revision:012d}"),
                "action": string_attribute(event.action),
                "at": string_attribute(iso_z(event.at)),
                "actor": string_attribute(event.actor),
                "detail": string_attribute(json.dumps(event.detail, sort_keys=True, default=str)),
                "ttl": number_attribute(int((event.at + AUDIT_KEPT).timestamp())),
            }
        )

    def _transact(self, items: list[TransactWriteItemTypeDef]) -> bool:
        """True when the transaction committed; False when a condition cancelled it (a lost race or a taken
        id: normal outcomes)."""
        return transaction_committed(self.client, items)


def _token_keys(token: ApiToken) -> list[Item]:
    return [
        {"pk": string_attribute(f"token#{token.token_hash}"), "sk": string_attribute("token")},
        {"pk": string_attribute(f"tokens#{token.team_id}"), "sk": string_attribute(token.token_id)},
    ]


def _token(item: Item) -> ApiToken:
    """A token row or list row (a row written before tokens had names: an ``admin`` token, ``token``)."""
    return ApiToken(
        token_hash=item["token_hash"]["S"],
        team_id=item["team_id"]["S"],
        generation=int(item["generation"]["N"]) if "generation" in item else 0,
        name=item["name"]["S"] if "name" in item else LEGACY_TOKEN_NAME,
        scope=TokenScope(item["scope"]["S"]) if "scope" in item else TokenScope.ADMIN,
        created_at=datetime.fromisoformat(item["created_at"]["S"]) if "created_at" in item else None,
        created_by=item["created_by"]["S"] if "created_by" in item else "",
    )
