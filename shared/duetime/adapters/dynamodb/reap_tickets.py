"""Reap tickets: one reap index entry for the runs a claim creates together.

A run row that carries its own reap entry (``reap_shard``, ``reap_at``: ``reap_checks``) pays the index twice:
1 write unit as the claim puts it in, 1 as the result takes it out. Almost every run finishes long before its
first check, so at a spike nearly all of those units buy nothing. A claim that creates ``TICKET_RUNS_MIN`` or
more runs writes their rows without an entry and a *ticket* per ``TICKET_RUNS_MAX`` of them instead: an item
of the runs table (key ``~reap-ticket-<random>`` / ``ticket``) in the reap index at the runs' first check,
listing their run ids. Under 1 KB, a ticket costs 2 write units in and 2 out, for up to 18 runs: about 0.22 a
run instead of 2.

A ticket lives in the reap shard of the first run it lists; the others may be of other partitions. Whoever
reaps that shard settles the whole ticket, and every shard is reaped: a poller reaps the shards of the
partitions it claims, so a ticket stays with the poller group whose claim wrote it.

The rules that keep every unfinished run findable (``DynamoStore.claim`` and ``runs_needing_attention``):

* **A run is always covered**, by its own entry or by a ticket in the index that lists it. The claim writes
  its rows, then its tickets, then its schedule moves: a claim that dies before its tickets are written has
  moved no schedule, so its rows are found in the way by the next claim of those jobs, which sends them
  again and lists them in a ticket of its own (every row found in the way is ticketed: whoever made it may
  have died before its ticket).
* **A ticket's check** is the runs' first check (``reap_checks.waiting_check`` from the claim): no lease
  taken after their messages become visible expires before it.
* **At its check** the reaper reads every run the ticket lists (one consistent BatchGetItem). A run that
  finished, has an entry of its own, or never came to be (the claim lost its race) needs nothing. A run
  still alive is *adopted*: it gets its own entry at its next check (``RUN_UNCOVERED_AS_READ``), or at the
  instant it needed the reaper, which passed, and it is then a candidate like any other. The ticket is
  deleted only once every run it lists needed nothing or was adopted; if any adoption lost its race (the run
  moved on meanwhile), the ticket stays in the index and the next pass reads its runs again.
* **Writes that give a run a check of its own** (a worker giving it back, a retry, the reaper sending it
  again) set ``reap_shard`` with ``reap_at``, so a ticketed run joins the index there. A result removes the
  entry only when the run has one (``Run.in_reap_index``, known from the lease); a run adopted during its
  call finishes still in the index, and the reaper removes it at its check (``RUN_FINISHED``).

Runs the API creates (a trigger, a retry by hand) carry their own entry, as do the runs of a claim that
creates fewer than ``TICKET_RUNS_MIN``: at two runs, two entries cost what one ticket does.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from duetime.adapters.dynamodb.codec import (
    Item,
    number_attribute,
    reap_shard,
    string_attribute,
    time_attribute,
)
from duetime.adapters.dynamodb.reap_checks import waiting_check
from duetime.domain.models import Run

TICKET_RUNS_MAX = 18  # 18 run ids of 47 characters keep a ticket under 1 KB: 1 write unit, 1 read unit
TICKET_RUNS_MIN = 3  # a claim's runs below this carry their own entries
TICKET_OCCURRENCE = "ticket"
TICKET_KEY_PREFIX = "~reap-ticket-"  # no job id starts with "~" (ULIDs are Crockford base32)
_RUNS = "runs"  # the run ids, space separated


def ticketed_run_ids(runs: Iterable[Run]) -> set[str]:
    """The runs of one ``DynamoStore.claim`` call (every claim it writes, one job's or a sweep's many)
    whose rows go without an entry of their own: all of them from ``TICKET_RUNS_MIN`` on. Manual runs are
    never claimed, so never ticketed."""
    run_ids = {run.run_id for run in runs}
    return run_ids if len(run_ids) >= TICKET_RUNS_MIN else set()


def ticket_chunks(runs: Sequence[Run]) -> list[list[Run]]:
    """The runs each ticket of ``runs`` lists: as few tickets as hold ``TICKET_RUNS_MAX`` each, filled evenly
    (so a claim of ``TICKET_RUNS_MIN`` or more never gets a ticket of fewer), each run once."""
    distinct = list({run.run_id: run for run in runs}.values())
    count = math.ceil(len(distinct) / TICKET_RUNS_MAX)
    return [distinct[i * len(distinct) // count : (i + 1) * len(distinct) // count] for i in range(count)]


def ticket_items(runs: Sequence[Run], lease_check: timedelta, ttl_epoch: int) -> list[Item]:
    """The tickets that cover ``runs`` (``ticket_chunks``), each in the shard of its first run and in the
    index at the earliest first check among its runs."""
    items = []
    for chunk in ticket_chunks(runs):
        items.append(
            {
                "job_id": string_attribute(f"{TICKET_KEY_PREFIX}{secrets.token_hex(8)}"),
                "occurrence": string_attribute(TICKET_OCCURRENCE),
                "reap_shard": string_attribute(reap_shard(chunk[0].partition)),
                "reap_at": time_attribute(min(_first_check(run, lease_check) for run in chunk)),
                _RUNS: string_attribute(" ".join(run.run_id for run in chunk)),
                "ttl": number_attribute(ttl_epoch),
            }
        )
    return items


def _first_check(run: Run, lease_check: timedelta) -> datetime:
    assert run.queue_deadline is not None, "a claimed run waits under a queue deadline"
    return waiting_check(run.created_at, run.queue_deadline, lease_check)


def is_ticket(item: Item) -> bool:
    occurrence: str = item["occurrence"]["S"]
    return occurrence == TICKET_OCCURRENCE


def listed_run_ids(ticket: Item) -> list[str]:
    runs: str = ticket[_RUNS]["S"]
    return runs.split()


def ticket_key(ticket: Item) -> Item:
    return {"job_id": ticket["job_id"], "occurrence": ticket["occurrence"]}
