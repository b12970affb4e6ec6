"""A worker's batch of runs in a few requests: leases, results and team slots, by PartiQL batches.

The writes are the single-run writes of ``runs.py`` and ``teams.py`` under the same named conditions
(``conditions.py``), made for up to 25 runs a request (``partiql.py``); each succeeds or fails on its own.
Per batch of runs of one team, on the common path: one consistent BatchGetItem and one batch to take the
leases (the batch alone for runs their messages carry), one batch to take the slots (those its process freed
lately first, ``FreedSlots``: no read; else one Query of a group before it), and one batch that records the
results and frees the slots together (``record_results_and_free_slots``), where slots are written with one
statement per item of five slots (``SLOTS_PER_ITEM``); a heartbeat is one batch for the leases and one for
the slots.

A batch of one run makes the single-run write instead (``runs.py``, ``teams.py``): one UpdateItem, where a
batch needs a read and a write to take a lease, and one guess at a free slot before any Query.

Taking a lease reads the runs first (the worker needs them to call their targets, and a batched UPDATE
returns nothing): a run not waiting for the message's attempt is dropped without a write. The lease write
itself is conditional all the same (``RUN_WAITING_FOR_ATTEMPT``): the read only spares a write.
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb import partiql
from duetime.adapters.dynamodb.codec import (
    Item,
    item_to_run,
    number_attribute,
    reap_shard,
    run_key,
    run_payload,
    string_attribute,
    time_attribute,
)
from duetime.adapters.dynamodb.reads import batch_get
from duetime.adapters.dynamodb.reap_checks import waiting_check
from duetime.adapters.dynamodb.store_part import StorePart
from duetime.domain.ids import split_run_id
from duetime.domain.models import Run, RunStatus, Team
from duetime.domain.timeutil import parse_iso_z, whole_seconds
from duetime.ports import ResultWrite

log = logging.getLogger(__name__)

# A team's concurrency slots live in groups of SLOTS_PER_KEY per partition key ("team#<id>#slots#<group>"),
# so a big team's starts spread over keys instead of meeting one partition's 1,000 WCU/s. Within a group,
# SLOTS_PER_ITEM slots share an item ("slot#<its first slot>"), slot k of it being the attributes
# "holder_<k>" and "until_<k>": a batch's runs take, extend and free their slots with one write per item,
# not one per slot (a batch of 10 runs of one team: 2 writes to take, 2 to free, instead of 10 and 10).
# Five slots keep the item under 1 KB (one write unit) whatever the run ids (65 bytes at most) and team id
# (``test_slot_item_stays_under_one_kilobyte``). A worker reads up to SLOT_GROUPS_SEARCHED groups, so for
# caps up to 100 "no free slot" means "at the cap" (or lost races).
SLOTS_PER_KEY = 25
SLOTS_PER_ITEM = 5
SLOT_GROUPS_SEARCHED = 4
# A batch first tries the slots its process freed lately (``FreedSlots``): a run's slot is freed as its result
# is recorded, and the next batch of the same team takes it again with the write it makes anyway, without
# the group's Query (one request of four a batch). A guess is only a guess: the take is SLOT_FREE's write as
# after a Query, and what it did not get is looked for as before. Slots freed longer ago than
# FREED_SLOT_GUESS_WINDOW are more likely another worker's by then, and not guessed.
FREED_ITEMS_REMEMBERED = 2 * SLOTS_PER_KEY // SLOTS_PER_ITEM  # per team
FREED_SLOT_GUESS_WINDOW = timedelta(seconds=10)
_WAITING = (RunStatus.QUEUED.value, RunStatus.RETRY_WAIT.value)


def slot_group_key(team_id: str, group: int) -> str:
    return f"team#{team_id}#slots#{group}"


def slot_groups_to_search(max_concurrency: int) -> list[int]:
    """Up to SLOT_GROUPS_SEARCHED of a team's slot groups, in random order, drawn without shuffling every
    group (a cap of 10,000 has 400 of them: shuffling them all took 101 µs a batch; drawing four, 3 µs)."""
    groups = math.ceil(max_concurrency / SLOTS_PER_KEY)
    return random.sample(range(groups), min(groups, SLOT_GROUPS_SEARCHED))


def slot_key(team_id: str, slot: int) -> Item:
    """The key of the item that holds ``slot`` (named by the item's first slot)."""
    first = slot - slot % SLOTS_PER_ITEM
    return {
        "pk": string_attribute(slot_group_key(team_id, slot // SLOTS_PER_KEY)),
        "sk": string_attribute(f"slot#{first:05d}"),
    }


def by_item(slots: Mapping[str, int]) -> dict[int, dict[str, int]]:
    """Run id -> slot, split by the item each slot lives in (keyed by the item's first slot). A batch naming
    one slot twice is refused, as DynamoDB refuses a batch naming one item twice."""
    if len(set(slots.values())) != len(slots):
        raise ValueError(f"a batch names the same slot twice: {sorted(slots.values())}")
    items: dict[int, dict[str, int]] = {}
    for run_id, slot in slots.items():
        items.setdefault(slot - slot % SLOTS_PER_ITEM, {})[run_id] = slot
    return items


def fill_items(run_ids: Sequence[str], free: Sequence[int]) -> dict[str, int]:
    """Give ``run_ids`` free slots, items with the most free slots first (random among equals), so the
    batch touches as few items, that is as few writes, as it can."""
    items: dict[int, list[int]] = {}
    for slot in free:
        items.setdefault(slot - slot % SLOTS_PER_ITEM, []).append(slot)
    order = sorted(items.values(), key=lambda cells: (-len(cells), random.random()))
    chosen = [slot for cells in order for slot in cells]
    return dict(zip(run_ids, chosen, strict=False))


class FreedSlots:
    """The slots this process freed lately, per team and per item (five slots share an item), with the
    store-clock instant each item last had slots freed: what a batch's slots are first looked for among
    (``WorkerBatches.acquire_slots``). Handed out by whole items, the fullest first, so a batch takes (and
    later frees) its slots with as few writes as after a Query (``fill_items``). Shared by the process's
    workers (each slot is handed to one batch only), forgotten with the process."""

    def __init__(self, items: int = FREED_ITEMS_REMEMBERED, window: timedelta = FREED_SLOT_GUESS_WINDOW):
        self._lock = threading.Lock()
        self._items = items
        self._window = window
        # team id -> an item's first slot -> (its slots freed, when last freed); oldest item first
        self._by_team: dict[str, dict[int, tuple[set[int], datetime]]] = {}

    def remember(self, team_id: str, slots: Iterable[int], freed_at: datetime) -> None:
        with self._lock:
            items = self._by_team.setdefault(team_id, {})
            for slot in slots:
                first = slot - slot % SLOTS_PER_ITEM
                cells, _ = items.pop(first, (set(), freed_at))
                cells.add(slot)
                items[first] = (cells, freed_at)  # now the newest
            while len(items) > self._items:
                del items[next(iter(items))]

    def forget(self, team_id: str, slots: Iterable[int]) -> None:
        """``slots`` were taken otherwise (after a Query): not free any more."""
        with self._lock:
            items = self._by_team.get(team_id, {})
            for slot in slots:
                cells, _ = items.get(slot - slot % SLOTS_PER_ITEM, (set(), None))
                cells.discard(slot)

    def hand_out(self, team_id: str, count: int, now: datetime, below: int) -> list[int]:
        """``count`` slots under ``below`` (the team's cap now) of items freed within the window before
        ``now``, the fullest items first (the newest among equals), each handed out once (forgotten here, as
        are the items too old and the slots over the cap); or none, leaving them here, when they would seat
        fewer runs, or need more items (more writes, to take and then to free) than a group read found
        free would: a guess never costs a write more than a Query would save."""
        with self._lock:
            items = self._by_team.get(team_id, {})
            for first, (cells, freed_at) in list(items.items()):
                cells.difference_update(range(below, first + SLOTS_PER_ITEM))  # over the cap now
                if not cells or now - freed_at > self._window:
                    del items[first]
            chosen: list[tuple[int, list[int]]] = []  # (an item's first slot, its slots handed out)
            seated = 0
            # Items are kept oldest first: newest first, then (a stable sort) the fullest first.
            for first, (cells, _) in sorted(reversed(items.items()), key=lambda item: -len(item[1][0])):
                if seated >= count:
                    break
                taken = sorted(cells)[: count - seated]
                chosen.append((first, taken))
                seated += len(taken)
            if seated < count or len(chosen) > math.ceil(count / SLOTS_PER_ITEM):
                return []
            for first, taken in chosen:
                cells = items[first][0]
                cells.difference_update(taken)
                if not cells:
                    del items[first]
        return [slot for _, taken in chosen for slot in taken]


class WorkerBatches(StorePart):
    """The batched run and slot writes of ``DynamoStore`` (``RunStore``'s and ``TeamStore``'s batch forms)."""

    freed_slots: FreedSlots  # set by ``DynamoStore.__init__``

    # The single-run forms (``DynamoStore``'s), for batches of one.
    acquire_lease: Callable[[str, int, str, datetime, datetime], Run | None]
    extend_lease: Callable[[str, int, str, datetime, datetime], bool]
    record_result: Callable[..., bool]
    acquire_slot: Callable[[Team, str, datetime, datetime], int | None]
    extend_slot: Callable[[str, int, str, datetime], bool]
    release_slot: Callable[[str, int, str], None]

    # --- leases and results ------------------------------------------------------------------------------

    def acquire_leases(
        self,
        attempts: Sequence[tuple[str, int]],
        owner: str,
        now: datetime,
        lease_until: datetime,
        carried: Mapping[str, Run] | None = None,
    ) -> dict[str, Run]:
        if len(attempts) == 1:  # one UpdateItem returns the run it leased: no read, carried or not
            ((run_id, attempt),) = attempts
            run = self.acquire_lease(run_id, attempt, owner, now, lease_until)
            return {run_id: run} if run is not None else {}
        carried = carried or {}
        as_carried = [
            carried[run_id]
            for run_id, attempt in attempts
            if run_id in carried
            and (carried[run_id].run_id, carried[run_id].attempt) == (run_id, attempt)
            and names_itself(carried[run_id])
        ]
        taken = {run.run_id for run in as_carried}
        leased = self._lease(
            as_carried, self._waiting([a for a in attempts if a[0] not in taken]), owner, now, lease_until
        )
        missed = [(run.run_id, run.attempt) for run in as_carried if run.run_id not in leased]
        if missed:  # a carried run that is not the stored one, or no longer waits: read it, as any other
            leased.update(self._lease([], self._waiting(missed), owner, now, lease_until))
        return leased

    def _waiting(self, attempts: Sequence[tuple[str, int]]) -> list[Run]:
        """The runs that wait for the attempts named (one consistent BatchGetItem); the others are gone, not
        waiting, or waiting for another attempt (stale or duplicate messages: no lease to take)."""
        keys: list[Item] = []
        for run_id, _ in attempts:
            try:
                keys.append(run_key(run_id))
            except ValueError:
                continue  # not a run id (a stray message): no such run
        if not keys:
            return []
        wanted = dict(attempts)
        return [
            item_to_run(item)
            for item in batch_get(self.client, self.names.runs, keys, consistent=True)
            if item["status"]["S"] in _WAITING and int(item["attempt"]["N"]) == wanted[item["run_id"]["S"]]
        ]

    def _lease(
        self,
        as_carried: Sequence[Run],
        as_read: Sequence[Run],
        owner: str,
        now: datetime,
        lease_until: datetime,
    ) -> dict[str, Run]:
        """Take the leases of runs carried by their messages (under RUN_AS_CARRIED as well) and of runs just
        read, in one request: the runs leased, as the store now holds them (instants to the second, as
        written; a carried run's come from its claim's clock)."""
        statements = [self._lease_statement(run, owner, now, lease_until, True) for run in as_carried]
        statements += [self._lease_statement(run, owner, now, lease_until, False) for run in as_read]
        leased: dict[str, Run] = {}
        runs = [*as_carried, *as_read]
        for run, written in zip(runs, partiql.execute(self.client, statements), strict=True):
            if written:
                leased[run.run_id] = run.model_copy(
                    update={
                        "status": RunStatus.RUNNING,
                        "owner": owner,
                        "lease_expires_at": whole_seconds(lease_until),
                        "started_at": run.started_at or whole_seconds(now),
                        "updated_at": whole_seconds(now),
                        "created_at": whole_seconds(run.created_at),
                        "nominal_at": whole_seconds(run.nominal_at),
                        "fire_at": whole_seconds(run.fire_at),
                        "queue_deadline": None,
                        "retry_at": None,
                    }
                )
        return leased

    def _lease_statement(
        self, run: Run, owner: str, now: datetime, lease_until: datetime, carried: bool
    ) -> partiql.Statement:
        """RUN_WAITING_FOR_ATTEMPT's write for ``run``; for a carried run, under RUN_AS_CARRIED too."""
        values: Item = {
            ":queued": string_attribute(RunStatus.QUEUED),
            ":retry_wait": string_attribute(RunStatus.RETRY_WAIT),
            ":running": string_attribute(RunStatus.RUNNING),
            ":attempt": number_attribute(run.attempt),
            ":owner": string_attribute(owner),
            ":lease_expires_at": time_attribute(lease_until),
            ":updated_at": time_attribute(now),
            ":started_at": time_attribute(run.started_at or now),
        }
        condition = c.RUN_WAITING_FOR_ATTEMPT
        if carried:
            values.update(
                {
                    ":team": string_attribute(run.team),
                    ":partition": number_attribute(run.partition),
                    ":nominal_at": time_attribute(run.nominal_at),
                    ":fire_at": time_attribute(run.fire_at),
                    ":max_attempts": number_attribute(run.max_attempts),
                    ":payload": string_attribute(run_payload(run)),
                    ":created_at": time_attribute(run.created_at),
                    ":ttl": number_attribute(run.expires_at_epoch),
                }
            )
            as_carried = c.RUN_AS_CARRIED.filled(
                started=c.STARTED_AT if run.started_at else c.NOT_STARTED,
                indexed=c.IN_REAP_INDEX if run.in_reap_index else c.NOT_IN_REAP_INDEX,
            )
            condition = condition.also(as_carried)
        return partiql.update(
            self.names.runs,
            run_key(run.run_id),
            condition,
            {**values, ":status": values[":running"]},
            sets=("status", "owner", "lease_expires_at", "updated_at", "started_at"),
            removes=("queue_deadline", "retry_at"),
        )

    def extend_leases(
        self, attempts: Sequence[tuple[str, int]], owner: str, now: datetime, lease_until: datetime
    ) -> set[str]:
        if len(attempts) == 1:
            ((run_id, attempt),) = attempts
            return {run_id} if self.extend_lease(run_id, attempt, owner, now, lease_until) else set()
        statements = [
            partiql.update(
                self.names.runs,
                run_key(run_id),
                c.LEASE_HELD,
                {
                    ":running": string_attribute(RunStatus.RUNNING),
                    ":owner": string_attribute(owner),
                    ":attempt": number_attribute(attempt),
                    ":now": time_attribute(now),
                    ":lease_expires_at": time_attribute(lease_until),
                },
                sets=("lease_expires_at",),
            )
            for run_id, attempt in attempts
        ]
        written = partiql.execute(self.client, statements)
        return {run_id for (run_id, _), ok in zip(attempts, written, strict=True) if ok}

    def record_results(self, results: Sequence[ResultWrite], owner: str, now: datetime) -> set[str]:
        if len(results) == 1:
            (one,) = results
            recorded = self.record_result(
                one.run, owner, one.status, one.result, now, one.retry_at, one.queue_deadline
            )
            return {one.run.run_id} if recorded else set()
        statements = [self._result_statement(write, owner, now) for write in results]
        written = partiql.execute(self.client, statements)
        return {write.run.run_id for write, ok in zip(results, written, strict=True) if ok}

    def record_results_and_free_slots(
        self,
        results: Sequence[ResultWrite],
        owner: str,
        now: datetime,
        slots: Mapping[str, Mapping[str, int]],
    ) -> set[str]:
        """The results' writes and the slots' releases in one request (up to 25 writes; a wave of 10 runs
        of one team is 10 + 2): each under its own condition, as ``record_results`` and ``release_slots``
        make them. A slot item whose release failed its condition is freed slot by slot (as
        ``release_slots``); one that failed otherwise is left to its lease's expiry (logged). A result that
        failed otherwise raises, after the slots were freed."""
        result_statements = [self._result_statement(write, owner, now) for write in results]
        releases = [
            (team_id, cells, statement)
            for team_id, team_slots in slots.items()
            for cells, statement in self._held_slot_statements(team_id, team_slots, _release, {})
        ]
        done = partiql.outcomes(self.client, [*result_statements, *(statement for *_, statement in releases)])
        for (team_id, cells, _), outcome in zip(releases, done[len(result_statements) :], strict=True):
            if isinstance(outcome, partiql.StatementFailed):
                log.warning("freeing slots failed; they come back when their leases pass: %s", outcome)
            elif not outcome:
                for run_id, slot in cells.items():
                    self.release_slot(team_id, slot, run_id)
            else:
                self.freed_slots.remember(team_id, cells.values(), now)
        recorded: set[str] = set()
        for write, outcome in zip(results, done[: len(result_statements)], strict=True):
            if isinstance(outcome, partiql.StatementFailed):
                raise outcome
            if outcome:
                recorded.add(write.run.run_id)
        return recorded

    def _result_statement(self, write: ResultWrite, owner: str, now: datetime) -> partiql.Statement:
        """``record_result``'s write (LEASE_OWNED) as a PartiQL statement."""
        values: Item = {
            ":running": string_attribute(RunStatus.RUNNING),
            ":owner": string_attribute(owner),
            ":attempt": number_attribute(write.run.attempt),
            ":status": string_attribute(write.status),
            ":result": string_attribute(write.result.model_dump_json(exclude_none=True)),
            ":updated_at": time_attribute(now),
        }
        if write.status is RunStatus.RETRY_WAIT:
            assert write.retry_at is not None and write.queue_deadline is not None
            values.update(
                {
                    ":next_attempt": number_attribute(write.run.attempt + 1),
                    ":retry_at": time_attribute(write.retry_at),
                    ":queue_deadline": time_attribute(write.queue_deadline),
                    ":reap_shard": string_attribute(reap_shard(write.run.partition)),
                    ":reap_at": time_attribute(
                        waiting_check(write.retry_at, write.queue_deadline, self.lease_check)
                    ),
                }
            )
            # A ticketed run joins the index here (reap_tickets): the shard is set with the check.
            sets: tuple[str, ...] = ("result", "updated_at", "retry_at", "queue_deadline", "reap_shard")
            sets = (*sets, "reap_at")
            removes: tuple[str, ...] = ("owner", "lease_expires_at")
            set_from = {"attempt": ":next_attempt"}  # the condition compares the old one, ":attempt"
        else:
            values[":finished_at"] = time_attribute(now)
            sets = ("result", "updated_at", "finished_at")
            # A ticketed run has no entry to remove (reap_tickets): the write then leaves the index alone.
            in_index = write.run.in_reap_index
            removes = ("lease_expires_at", "reap_shard", "reap_at") if in_index else ("lease_expires_at",)
            set_from = {}
        return partiql.update(
            self.names.runs,
            run_key(write.run.run_id),
            c.LEASE_OWNED,
            values,
            sets=("status", *sets),  # ":status" is the new one; the condition reads ":running"
            removes=removes,
            set_from=set_from,
        )

    # --- team concurrency slots -------------------------------------------------------------------------

    def acquire_slots(
        self, team: Team, run_ids: Sequence[str], now: datetime, lease_until: datetime
    ) -> dict[str, int]:
        if len(run_ids) == 1:
            slot = self.acquire_slot(team, run_ids[0], now, lease_until)
            return {run_ids[0]: slot} if slot is not None else {}
        taken = self._take_freed_slots(team, run_ids, now, lease_until)
        wanted = [run_id for run_id in run_ids if run_id not in taken]
        for group in slot_groups_to_search(team.max_concurrency):
            if not wanted:
                break
            free, existing = self.slot_group_state(team, group, now)
            items = by_item(fill_items(wanted, free))
            statements = [
                self._take_slots_statement(team.team_id, first, cells, first in existing, now, lease_until)
                for first, cells in items.items()
            ]
            for cells, written in zip(items.values(), partiql.execute(self.client, statements), strict=True):
                if written:
                    taken.update(cells)
                    self.freed_slots.forget(team.team_id, cells.values())
            wanted = [run_id for run_id in wanted if run_id not in taken]
        return taken

    def _take_freed_slots(
        self, team: Team, run_ids: Sequence[str], now: datetime, lease_until: datetime
    ) -> dict[str, int]:
        """Take slots this process freed lately (``FreedSlots``) for ``run_ids``, without reading their group:
        one SLOT_FREE write per item, as after a Query; the slots taken, by run id (none: no request)."""
        guesses = self.freed_slots.hand_out(team.team_id, len(run_ids), now, team.max_concurrency)
        if not guesses:
            return {}
        items = by_item(dict(zip(run_ids, guesses, strict=False)))
        # A freed slot's item exists (a release removes a slot's attributes, never the item): an UPDATE.
        statements = [
            self._take_slots_statement(team.team_id, first, cells, True, now, lease_until)
            for first, cells in items.items()
        ]
        taken: dict[str, int] = {}
        for cells, written in zip(items.values(), partiql.execute(self.client, statements), strict=True):
            if written:
                taken.update(cells)
        return taken

    def _take_slots_statement(
        self,
        team_id: str,
        first: int,
        cells: Mapping[str, int],
        exists: bool,
        now: datetime,
        lease_until: datetime,
    ) -> partiql.Statement:
        """Take ``cells`` (run id -> slot) of the item whose first slot is ``first``: all or none."""
        key = slot_key(team_id, first)
        ks = {slot % SLOTS_PER_ITEM: run_id for run_id, slot in cells.items()}
        if not exists:  # SLOT_IS_NEW: the INSERT fails when another worker made the item meanwhile
            holders = {f"holder_{k}": string_attribute(run_id) for k, run_id in ks.items()}
            expiries = {f"until_{k}": time_attribute(lease_until) for k in ks}
            return partiql.insert(self.names.control, {**key, **holders, **expiries}, c.SLOT_IS_NEW)
        values: Item = {":now": time_attribute(now), ":until": time_attribute(lease_until)}
        values.update({f":run_{k}": string_attribute(run_id) for k, run_id in ks.items()})
        return partiql.update(
            self.names.control,
            key,
            c.SLOT_FREE.for_slots(ks),
            values,
            set_from={
                **{f"holder_{k}": f":run_{k}" for k in ks},
                **{f"until_{k}": ":until" for k in ks},
            },
        )

    def slot_group_state(self, team: Team, group: int, now: datetime) -> tuple[list[int], set[int]]:
        """One group's free slots (in order) and the first slots of its items that exist (one consistent
        Query of the group's key)."""
        held: set[int] = set()
        existing: set[int] = set()
        pages = self.client.get_paginator("query").paginate(
            TableName=self.names.control,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": string_attribute(slot_group_key(team.team_id, group))},
            ConsistentRead=True,
        )
        for item in (item for page in pages for item in page.get("Items", [])):
            first = int(item["sk"]["S"].split("#")[1])
            existing.add(first)
            for k in range(SLOTS_PER_ITEM):
                if f"holder_{k}" in item and parse_iso_z(item[f"until_{k}"]["S"]) >= now:
                    held.add(first + k)
        first = group * SLOTS_PER_KEY
        last = min(team.max_concurrency, first + SLOTS_PER_KEY)
        return [slot for slot in range(first, last) if slot not in held], existing

    def extend_slots(self, team_id: str, slots: Mapping[str, int], lease_until: datetime) -> set[str]:
        if len(slots) == 1:
            ((run_id, slot),) = slots.items()
            return {run_id} if self.extend_slot(team_id, slot, run_id, lease_until) else set()

        def extend(ks: Sequence[int]) -> tuple[dict[str, str], list[str]]:
            return {f"until_{k}": ":until" for k in ks}, []

        def extend_one(run_id: str, slot: int) -> bool:
            return self.extend_slot(team_id, slot, run_id, lease_until)

        return self._write_held_slots(
            team_id, slots, extend, {":until": time_attribute(lease_until)}, extend_one
        )

    def release_slots(self, team_id: str, slots: Mapping[str, int]) -> None:
        if len(slots) == 1:
            ((run_id, slot),) = slots.items()
            self.release_slot(team_id, slot, run_id)
            return

        def release_one(run_id: str, slot: int) -> bool:
            self.release_slot(team_id, slot, run_id)
            return True

        self._write_held_slots(team_id, slots, _release, {}, release_one)

    def _write_held_slots(
        self,
        team_id: str,
        slots: Mapping[str, int],
        change: Callable[[Sequence[int]], tuple[dict[str, str], list[str]]],
        values: Item,
        one_by_one: Callable[[str, int], bool],
    ) -> set[str]:
        """One SLOT_HELD write per item for the slots (run id -> slot) the batch holds in it, all or none
        (``_held_slot_statements``). Returns the run ids whose slots were written. An item whose write failed
        (one of its slots changed hands after its lease passed) is written again slot by slot under each
        slot's own condition, so the slots still held are extended or freed all the same (rare: an
        UpdateItem each)."""
        writes = self._held_slot_statements(team_id, slots, change, values)
        done: set[str] = set()
        statements = [statement for _, statement in writes]
        for (cells, _), written in zip(writes, partiql.execute(self.client, statements), strict=True):
            if written:
                done.update(cells)
            else:
                done.update(run_id for run_id, slot in cells.items() if one_by_one(run_id, slot))
        return done

    def _held_slot_statements(
        self,
        team_id: str,
        slots: Mapping[str, int],
        change: Callable[[Sequence[int]], tuple[dict[str, str], list[str]]],
        values: Item,
    ) -> list[tuple[dict[str, int], partiql.Statement]]:
        """Per item, its slots (run id -> slot) and the SLOT_HELD write of them: ``change`` gives the write's
        SETs (attribute -> value name) and REMOVEs for the item's slot numbers ``k``."""
        writes = []
        for first, cells in by_item(slots).items():
            ks = [slot % SLOTS_PER_ITEM for slot in cells.values()]
            sets, removes = change(ks)
            holders = {
                f":run_{slot % SLOTS_PER_ITEM}": string_attribute(run_id) for run_id, slot in cells.items()
            }
            statement = partiql.update(
                self.names.control,
                slot_key(team_id, first),
                c.SLOT_HELD.for_slots(ks),
                {**values, **holders},
                removes=removes,
                set_from=sets,
            )
            writes.append((cells, statement))
        return writes


def _release(ks: Sequence[int]) -> tuple[dict[str, str], list[str]]:
    """A release's change to an item's slots ``ks``: both attributes of each removed."""
    return {}, [name for k in ks for name in (f"holder_{k}", f"until_{k}")]


def names_itself(run: Run) -> bool:
    """Whether ``run``'s id is a run id, of its job (the key a lease statement writes to says the rest)."""
    try:
        job_id, _ = split_run_id(run.run_id)
    except ValueError:
        return False
    return job_id == run.job_id
