"""Every conditional write duetime makes, named and explained once.

A failed condition is how DynamoDB tells us we lost a race; the store turns it into ``False``/``None``.
Placeholders (``:name``) are filled by the write that uses the condition.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Condition:
    name: str
    expression: str
    why: str
    partiql: str = ""  # the same condition as a PartiQL WHERE clause, for batched writes (``partiql.py``)

    def for_slots(self, slots: Iterable[int]) -> Condition:
        """A slot condition (written for slot ``{k}`` of an item) held by each of ``slots`` at once."""
        ks = list(slots)
        return Condition(
            self.name,
            " AND ".join(f"({self.expression.format(k=k)})" for k in ks),
            self.why,
            " AND ".join(f"({self.partiql.format(k=k)})" for k in ks),
        )

    def also(self, other: Condition) -> Condition:
        """This condition and ``other`` at once (named after this one)."""
        return Condition(
            self.name,
            f"({self.expression}) AND ({other.expression})",
            self.why,
            f"({self.partiql}) AND ({other.partiql})",
        )

    def filled(self, **parts: tuple[str, str]) -> Condition:
        """A condition written with ``{part}`` clauses, each given in both forms (expression, PartiQL)."""
        return Condition(
            self.name,
            self.expression.format(**{name: forms[0] for name, forms in parts.items()}),
            self.why,
            self.partiql.format(**{name: forms[1] for name, forms in parts.items()}),
        )


JOB_IS_NEW = Condition(
    "JOB_IS_NEW",
    "attribute_not_exists(job_id)",
    "Creating a job never overwrites another one with the same id.",
)

RUN_IS_NEW = Condition(
    "RUN_IS_NEW",
    "attribute_not_exists(run_id)",
    "One run per (job, nominal time): the run id is the job id plus the nominal time, so a second poller "
    "claiming the same time cannot create a second run.",
)

JOB_UNCHANGED_SINCE_READ = Condition(
    "JOB_UNCHANGED_SINCE_READ",
    "version = :expected_version",
    "The claim moves the job's next due time forward only if nobody moved it (or edited the job) since "
    "the poller read it: of two pollers, exactly one moves it. A deleted job fails it too.",
    '"version" = :expected_version',
)

RUN_WAITING_FOR_ATTEMPT = Condition(
    "RUN_WAITING_FOR_ATTEMPT",
    "#status IN (:queued, :retry_wait) AND attempt = :attempt",
    "A worker takes the lease only for the attempt its message names and only while the run waits; "
    "duplicate and stale messages fail here and are dropped.",
    '("status" = :queued OR "status" = :retry_wait) AND "attempt" = :attempt',
)

RUN_AS_CARRIED = Condition(
    "RUN_AS_CARRIED",
    "team = :team AND #partition = :partition AND nominal_at = :nominal_at AND fire_at = :fire_at AND "
    "max_attempts = :max_attempts AND payload = :payload AND created_at = :created_at AND #ttl = :ttl AND "
    "{started} AND {indexed}",
    "A poller's message carries its run as the claim wrote it, so a worker takes the lease without reading "
    "the row first (with RUN_WAITING_FOR_ATTEMPT): the stored run must be the carried one, attribute by "
    "attribute (what is called and how, for which team, when), started or not and with a reap entry of its "
    "own or not as carried. A forged, garbled or outdated message fails here, and the worker reads the row.",
    '"team" = :team AND "partition" = :partition AND "nominal_at" = :nominal_at AND "fire_at" = :fire_at '
    'AND "max_attempts" = :max_attempts AND "payload" = :payload AND "created_at" = :created_at AND '
    '"ttl" = :ttl AND {started} AND {indexed}',
)
# RUN_AS_CARRIED's parts: (expression, PartiQL).
STARTED_AT = ("started_at = :started_at", '"started_at" = :started_at')
NOT_STARTED = ("attribute_not_exists(started_at)", '"started_at" IS MISSING')
IN_REAP_INDEX = ("attribute_exists(reap_at)", '"reap_at" IS NOT MISSING')
NOT_IN_REAP_INDEX = ("attribute_not_exists(reap_at)", '"reap_at" IS MISSING')

LEASE_HELD = Condition(
    "LEASE_HELD",
    "#status = :running AND #owner = :owner AND attempt = :attempt AND lease_expires_at > :now",
    "A heartbeat extends only a lease this worker still holds by the store's clock: an expired lease "
    "cannot be kept alive, whatever the worker's own clock says.",
    '"status" = :running AND "owner" = :owner AND "attempt" = :attempt AND "lease_expires_at" > :now',
)

LEASE_OWNED = Condition(
    "LEASE_OWNED",
    "#status = :running AND #owner = :owner AND attempt = :attempt",
    "Only the owner of the current attempt records its result; a stale worker (its lease was expired "
    "and the run re-queued or taken over) is rejected.",
    '"status" = :running AND "owner" = :owner AND "attempt" = :attempt',
)

LEASE_EXPIRED = Condition(
    "LEASE_EXPIRED",
    "#status = :running AND attempt = :attempt AND lease_expires_at < :now",
    "The reaper takes a run back only when its lease has passed by the store's clock, so no worker, "
    "whatever its clock, can steal a live lease.",
)

WAIT_EXPIRED = Condition(
    "WAIT_EXPIRED",
    "#status = :status AND attempt = :attempt AND queue_deadline < :now",
    "A queued or retry-waiting run past its queue deadline lost its message; the reaper re-sends it once per "
    "deadline.",
)

# --- the reap index holds checks (``reap_checks.py``): the two writes that move a run's check to its next
# one. Each holds only while the run is in the state the reaper read, so a run that moved on meanwhile (a
# result, a new attempt) keeps the check its own write set: a lost race, and the reaper leaves it at that.
LEASE_OUTLIVES_CHECK = Condition(
    "LEASE_OUTLIVES_CHECK",
    "#status = :running AND attempt = :attempt AND lease_expires_at >= :now",
    "A running run whose lease is still live at its check gets the lease expiry the reaper read as its next "
    "check (a heartbeat since then only pushed the lease further out: the check stays no later than it).",
    '"status" = :running AND "attempt" = :attempt AND "lease_expires_at" >= :now',
)

WAIT_OUTLIVES_CHECK = Condition(
    "WAIT_OUTLIVES_CHECK",
    "#status = :status AND attempt = :attempt AND queue_deadline = :deadline",
    "A waiting run whose queue deadline is still ahead at its check gets its next waiting check, only while "
    "it still waits for the same attempt under the same deadline.",
    '"status" = :status AND "attempt" = :attempt AND "queue_deadline" = :deadline',
)

# --- reap tickets (``reap_tickets.py``): a claim's runs share one index entry until their first check ---
RUN_UNCOVERED_AS_READ = Condition(
    "RUN_UNCOVERED_AS_READ",
    "#status = :status AND attempt = :attempt AND attribute_not_exists(reap_at)",
    "At its ticket's check, a run still alive gets an entry of its own only while it is in the state the "
    "reaper read and still has none: a run that moved on meanwhile (a result, a new attempt, an entry its "
    "own write set) is a lost race, and the ticket stays for the next pass to read it again.",
    '"status" = :status AND "attempt" = :attempt AND "reap_at" IS MISSING',
)

RUN_FINISHED = Condition(
    "RUN_FINISHED",
    "attribute_exists(finished_at)",
    "A finished run found at its check (adopted from a ticket while its call ran, so its worker did not know "
    "of its entry) leaves the index; a run sent again by hand since then has no finished_at and keeps it.",
    '"finished_at" IS NOT MISSING',
)

TICKET_IS_NEW = Condition(
    "TICKET_IS_NEW",
    "attribute_not_exists(job_id)",
    "A reap ticket's key is random; the condition only keeps a (vanishingly unlikely) collision from "
    "replacing another claim's ticket.",
)

WATCH_IS_NEW = Condition(
    "WATCH_IS_NEW",
    "attribute_not_exists(job_id)",
    "A claim writes a watched run's deadline watch once: a claim made again after one cut between its steps "
    "finds the watch there and leaves it as it is (one watch, so one missed alert, per scheduled time).",
)

WATCH_EXISTS = Condition(
    "WATCH_EXISTS",
    "attribute_exists(job_id)",
    "A settled watch is deleted once: of a worker and a poller settling the same watch, one deletes it.",
)

JOB_NOT_MISSING = Condition(
    "JOB_NOT_MISSING",
    "attribute_not_exists(job_id)",
    "A job is flagged missing by its first missed time only: a later miss while it is flagged leaves the "
    "flag (and the time it names) as it is.",
)

JOB_MISSING_AS_READ = Condition(
    "JOB_MISSING_AS_READ",
    "since = :since",
    "A met time clears the missing flag it read, and only the writer whose clear lands raises `recovered`: "
    "two later times met at once raise it once, and a flag set again since (a newer miss) is not cleared.",
)

NOTICE_DUE_AS_READ = Condition(
    "NOTICE_DUE_AS_READ",
    "reap_at = :seen",
    "A notification group is taken for delivery, and then settled, only while its due time is the one its "
    "deliverer read (or set as its lease): of pollers racing for a group one takes it, and one whose lease "
    "passed (another took the group over) changes nothing.",
)

NOTICE_NONE_PENDING = Condition(
    "NOTICE_NONE_PENDING",
    "reap_at = :seen AND pending = :zero",
    "A group whose quiet window ended leaves the due index only if no notice came in since it was taken: a "
    "notice that did keeps it due.",
)

# A team's slots live SLOTS_PER_ITEM to an item, each slot a pair of attributes ("holder_<k>",
# "until_<k>"), so a worker takes, extends and frees a batch's slots with one write per item rather than
# one per slot (``worker_batches.py``). The slot conditions are written for one slot, ``{k}``; a write to
# several slots of an item holds all of theirs at once (``Condition.for_slots``), so it takes or frees
# them all or none.
SLOT_FREE = Condition(
    "SLOT_FREE",
    "attribute_not_exists(holder_{k}) OR until_{k} < :now OR holder_{k} = :run_{k}",
    "A concurrency slot can be taken when it is empty or its holder's lease expired (a dead worker never "
    "leaks a slot); the same run may take it again.",
    '"holder_{k}" IS MISSING OR "until_{k}" < :now OR "holder_{k}" = :run_{k}',
)

SLOT_IS_NEW = Condition(
    "SLOT_IS_NEW",
    "attribute_not_exists(sk)",
    "A slot item is made by the first batch to take slots of it (a batched INSERT, whose condition this "
    "is): of two workers making it at once, one holds its slots and the other lost the race.",
)

SLOT_HELD = Condition(
    "SLOT_HELD",
    "holder_{k} = :run_{k}",
    "Only the run holding a slot extends or frees it.",
    '"holder_{k}" = :run_{k}',
)

WATERMARK_BEHIND = Condition(
    "WATERMARK_BEHIND",
    "attribute_not_exists(low_water) OR low_water < :bucket",
    "A partition's low-water mark only moves forward.",
    '"low_water" < :bucket',  # batched: a PartiQL UPDATE needs the item, which ensure_low_water_mark made
)

WATERMARK_BEHIND_AS_READ = Condition(
    "WATERMARK_BEHIND_AS_READ",
    "low_water < :bucket AND low_water >= :read",
    "A poller raises a mark only from at least where it read it: a mark lowered since (``duetime restore`` "
    "rebuilding the marks of a restored jobs table, WATERMARK_AHEAD) is not raised over the buckets that "
    "poller never read. The poller then reads the marks again.",
    '"low_water" < :bucket AND "low_water" >= :read',
)

WATERMARK_AHEAD = Condition(
    "WATERMARK_AHEAD",
    "low_water > :bucket",
    "``duetime restore`` lowers a partition's mark to the oldest bucket that holds a due row of the restored "
    "jobs table (or the current minute), only where the mark is later: rows behind a mark are never read, "
    "and a mark already at or before them is left as it is.",
)

WATERMARK_MISSING = Condition(
    "WATERMARK_MISSING",
    "attribute_not_exists(low_water)",
    "Before the first job of a partition is written, its mark is set to the current minute (if it has "
    "none), so a poller that starts later still reads from there.",
)


QUARANTINED_ROW_IS_NEW = Condition(
    "QUARANTINED_ROW_IS_NEW",
    "attribute_not_exists(pk)",
    "An unreadable row is kept for the operator once, with the time it was first reported; a poller that "
    "finds it again (another process, the next reign) leaves that record as it is.",
)

INSTALLATION_NEVER_FINALIZED = Condition(
    "INSTALLATION_NEVER_FINALIZED",
    "attribute_not_exists(finalized_format)",
    "A new installation is finalized at its first release's format once, by whichever process sees first "
    "that its tables hold nothing; one that ran an older release, or that another process started, is left "
    "as it is.",
)

INSTALLATION_FINALIZED_AS_READ = Condition(
    "INSTALLATION_FINALIZED_AS_READ",
    "(attribute_not_exists(finalized_format) AND :was = :first) OR finalized_format = :was",
    "A finalize judged the record it read (which releases still run, the format it holds): it lands only if "
    "no other finalize moved the format since; an installation never finalized holds format 1.",
)


TEAM_IS_NEW = Condition(
    "TEAM_IS_NEW",
    "attribute_not_exists(pk)",
    "Creating a team (or its token, or a create request's idempotency key) never overwrites one.",
)

TOKEN_EXISTS = Condition(
    "TOKEN_EXISTS",
    "attribute_exists(pk)",
    "A token is revoked by deleting its rows only while they are there: two revocations of one token at "
    "once are one revocation, and the loser is told the token is gone.",
)

EXACT_QUOTA_LEFT = Condition(
    "EXACT_QUOTA_LEFT",
    "attribute_exists(pk) AND (attribute_not_exists(exact_jobs) OR exact_jobs < :quota)",
    "A team gains an exact-time job only while its count is under its quota; the count moves in the same "
    "transaction as the job, so it cannot drift.",
)

TEAM_UNCHANGED_SINCE_READ = Condition(
    "TEAM_UNCHANGED_SINCE_READ",
    "team = :before",
    "An operator's change to a team (limits, token rotation, signing-secret rotation, disabling) is written "
    "only over the settings it was computed from, so two changes at once cannot undo each other.",
)

JOB_QUOTA_LEFT = Condition(
    "JOB_QUOTA_LEFT",
    "attribute_not_exists(job_count) OR job_count < :max_jobs",
    "A team gains a job only while its job count is under its max_jobs; the count moves in the same "
    "transaction as the job (one update of the team row with the exact-job count), so it cannot drift.",
)

JOB_VERSION_IS = Condition(
    "JOB_VERSION_IS",
    "version = :expected_version AND team = :team",
    "An edit, pause, resume or delete applies only to the version the API read (no lost updates, even "
    "against a concurrent claim), and only within the caller's team.",
)

RUN_ENDED_UNSUCCESSFULLY = Condition(
    "RUN_ENDED_UNSUCCESSFULLY",
    "#status IN (:failed, :dead)",
    "Only a failed or dead run can be sent back to the queue by hand.",
)

RUN_CANCELLABLE = Condition(
    "RUN_CANCELLABLE",
    "#status IN (:queued, :retry_wait, :running)",
    "A run is cancelled only while it is not finished: a queued or retry-waiting run is then never leased "
    "(RUN_WAITING_FOR_ATTEMPT fails), and a running one's heartbeat and result fail (LEASE_HELD, "
    "LEASE_OWNED need running), so its worker gives it up. Of a cancel and a result written at once, "
    "exactly one holds: a run that finished first answers 409.",
)

# --- the poller lease: one item per partition group, ("poller#<group>", "lease") in the control table ---
# Instants in these conditions are the store's clock, to the millisecond (``poller_lease`` explains the life).

POLLER_LEASE_FREE = Condition(
    "POLLER_LEASE_FREE",
    "attribute_not_exists(holder) OR expires_at < :now",
    "An invocation takes a partition group's lease only when nobody holds it or its holder stopped renewing "
    "and it expired by the store's clock; that holder stopped claiming before its expiry, so the taker may "
    "claim at once.",
)

POLLER_LEASE_HELD = Condition(
    "POLLER_LEASE_HELD",
    "holder = :me AND expires_at > :now",
    "Only the holder renews the lease, and only before it expires: an expired lease may already be "
    "another invocation's, and a holder that paused past its expiry cannot revive it.",
)

POLLER_LEASE_MINE = Condition(
    "POLLER_LEASE_MINE",
    "holder = :me",
    "An invocation whose run ends without a successor gives the lease back only if it is still its own, "
    "so the next invocation takes it at once instead of waiting for it to expire.",
)

POLLER_QUIET_UNWOKEN = Condition(
    "POLLER_QUIET_UNWOKEN",
    "holder = :me AND (attribute_not_exists(wakes) OR wakes = :seen)",
    "A holder that found its group quiet gives the lease back (and stops until the next tick) only if no "
    "job write woke the group since it read the wake count, some seconds before it last read the indexes; "
    "otherwise the job that woke it may not have shown in the due index yet, and the holder stays.",
)

POLLER_SUCCESSOR_VACANT = Condition(
    "POLLER_SUCCESSOR_VACANT",
    "attribute_exists(holder) AND holder <> :me AND (attribute_not_exists(successor) OR successor = :me)",
    "A standby invocation registers as the holder's one successor only while nobody else is registered.",
)

POLLER_SUCCESSOR_IS_ME = Condition(
    "POLLER_SUCCESSOR_IS_ME",
    "successor = :me",
    "A standby that will not be around to take over withdraws its own registration (and an offer made to "
    "it), never another's.",
)

POLLER_HANDOVER_OFFERABLE = Condition(
    "POLLER_HANDOVER_OFFERABLE",
    "holder = :me AND expires_at > :now AND successor = :successor AND attribute_not_exists(handover_at)",
    "The holder offers the group to the registered successor at one whole second ahead, one offer at a "
    "time, and only while its own lease is valid; from then on it claims nothing at or after that second "
    "until the offer is withdrawn.",
)

POLLER_HANDOVER_OFFERED = Condition(
    "POLLER_HANDOVER_OFFERED",
    "holder = :holder AND successor = :me AND handover_at = :at",
    "The successor takes the lease from the offered second only while that very offer stands: not once the "
    "holder withdrew it, and not once the lease changed hands some other way.",
)

POLLER_HANDOVER_UNANSWERED = Condition(
    "POLLER_HANDOVER_UNANSWERED",
    "holder = :me AND handover_at = :at",
    "A holder whose offer was not accepted shortly before the second withdraws it and keeps the lease. "
    "Acceptance and withdrawal exclude each other, so exactly one invocation claims after the second.",
)

# --- each team's API rate: one item per team, ("ratelimit#<team>", "ratelimit") in the control table -----
# ``tat`` is the team's theoretical arrival time in microseconds since the epoch
# (``duetime.domain.rate_limit`` explains the rule); ``:now`` is the store's clock. Each request makes the
# write for the state it expects the bucket in; a failed condition hands back the item, which says the state
# it is really in (TAT only moves forward, so a request's writes are at most two and the second one is the
# last).

API_RATE_IDLE = Condition(
    "API_RATE_IDLE",
    "attribute_not_exists(tat) OR tat <= :now",
    "A request finding its team's bucket idle (no TAT, or a TAT not after now: a whole burst is free) is "
    "allowed and sets TAT to now plus one interval, an absolute value: only while the bucket is still idle, "
    "or two API Lambdas that both saw it idle would both start it from now and one burst would count twice.",
)

API_RATE_WITHIN_BURST = Condition(
    "API_RATE_WITHIN_BURST",
    "tat > :now AND tat <= :last_allowed",
    "A request finding its team's bucket started but not full (TAT after now, at most burst - 1 intervals "
    "ahead) is allowed and adds one interval to TAT in place, so any number of concurrent requests each add "
    "their own interval and none is lost; the request that would take TAT past the burst fails here and is "
    "refused (429) without writing anything.",
)

RUN_BUDGET_STALE = Condition(
    "RUN_BUDGET_STALE",
    "attribute_not_exists(#minute) OR #minute < :minute",
    "A trigger or backfill finding its team's run budget counting no minute or an earlier one starts the "
    "minute over, setting the count to its own runs (absolute values): only while no other API Lambda has "
    "started this minute, or two that both saw it stale would each start from zero and one minute would "
    "count twice.",
)

RUN_BUDGET_HAS_ROOM = Condition(
    "RUN_BUDGET_HAS_ROOM",
    "#minute >= :minute AND #runs <= :most_held",
    "A trigger or backfill adds its runs to the count of the minute its team's budget is in (this one, or a "
    "later one another API Lambda's clock is already in: never more generous) only while the count leaves "
    "room for all of them, adding in place so concurrent spends each add their own; the spend that would "
    "pass runs_per_minute fails here and is refused (429) with nothing written, nor any run created.",
)

RUN_BUDGET_STILL_IN = Condition(
    "RUN_BUDGET_STILL_IN",
    "#minute = :minute AND #runs >= :runs",
    "Runs paid for but not created (times that already had a run) are given back only to the minute they "
    "were counted in, while it lasts; once the budget has moved to a later minute they are that minute's "
    "business no longer, and the give-back is dropped.",
)


# --- team calendars: one item per (team, name), ("calendar#<team>", "<name>") in the control table ----------
# ``version`` stays on the item after a delete (which removes ``calendar``), so a name's versions are never
# reused and (team, name, version) names one content for good (``calendars.py``).

CALENDAR_IS_NEW = Condition(
    "CALENDAR_IS_NEW",
    "attribute_not_exists(pk)",
    "A calendar is created at version 1 only under a name the team never used: of two creates at once, one "
    "holds, and the other is told the name is taken.",
)

CALENDAR_NAME_FREED = Condition(
    "CALENDAR_NAME_FREED",
    "attribute_not_exists(calendar) AND version = :previous",
    "A calendar created under a deleted one's name continues from the deleted one's last version, read just "
    "before: a create or delete since then (the version moved) makes it a lost race, so no version of a name "
    "ever names two contents.",
)

CALENDAR_VERSION_IS = Condition(
    "CALENDAR_VERSION_IS",
    "attribute_exists(calendar) AND version = :expected_version",
    "An update or delete applies only to the version of the calendar the API read (optimistic concurrency: "
    "no lost updates); a change since then is a lost race, answered 409 when the caller named the version.",
)

CALENDAR_IS_LIVE = Condition(
    "CALENDAR_IS_LIVE",
    "attribute_exists(calendar)",
    "A job write that starts using a calendar counts itself on the calendar's item (``jobs_using``) only "
    "while the calendar exists: a job never names a calendar deleted before it was written.",
)

CALENDAR_UNUSED = Condition(
    "CALENDAR_UNUSED",
    "attribute_exists(calendar) AND version = :expected_version "
    "AND (attribute_not_exists(jobs_using) OR jobs_using = :zero)",
    "A calendar is deleted only at the version read and while no job uses it (the count job writes keep in "
    "the same transactions as the jobs): a job written at the same moment makes the delete a lost race, "
    "answered 409 naming the jobs, never a job left naming a calendar that is gone.",
)

JOB_KEY_IS_FREE = Condition(
    "JOB_KEY_IS_FREE",
    "attribute_not_exists(pk)",
    "A job takes a key (``jobkey#<team>`` / ``<key>``, written in the job's own transaction) only while no "
    "job of the team has it: of two writes giving one key to two jobs, one holds and the other is a 409.",
)

TABLE_MODES_AS_READ = Condition(
    "TABLE_MODES_AS_READ",
    "attribute_not_exists(pk) OR #switches_made = :switches_made",
    "the tables' switch log is as the switcher read it (or not yet written): two looks at once never both "
    "count themselves under AWS's four switches to on demand a day, nor lose each other's switch",
)


ALL_CONDITIONS = (
    JOB_IS_NEW,
    RUN_IS_NEW,
    JOB_UNCHANGED_SINCE_READ,
    RUN_WAITING_FOR_ATTEMPT,
    RUN_AS_CARRIED,
    LEASE_HELD,
    LEASE_OWNED,
    LEASE_EXPIRED,
    WAIT_EXPIRED,
    LEASE_OUTLIVES_CHECK,
    WAIT_OUTLIVES_CHECK,
    RUN_UNCOVERED_AS_READ,
    RUN_FINISHED,
    TICKET_IS_NEW,
    WATCH_IS_NEW,
    WATCH_EXISTS,
    JOB_NOT_MISSING,
    JOB_MISSING_AS_READ,
    NOTICE_DUE_AS_READ,
    NOTICE_NONE_PENDING,
    SLOT_FREE,
    SLOT_IS_NEW,
    SLOT_HELD,
    WATERMARK_BEHIND,
    WATERMARK_BEHIND_AS_READ,
    WATERMARK_AHEAD,
    WATERMARK_MISSING,
    QUARANTINED_ROW_IS_NEW,
    INSTALLATION_NEVER_FINALIZED,
    INSTALLATION_FINALIZED_AS_READ,
    TEAM_IS_NEW,
    TOKEN_EXISTS,
    EXACT_QUOTA_LEFT,
    JOB_QUOTA_LEFT,
    TEAM_UNCHANGED_SINCE_READ,
    JOB_VERSION_IS,
    RUN_ENDED_UNSUCCESSFULLY,
    RUN_CANCELLABLE,
    POLLER_LEASE_FREE,
    POLLER_LEASE_HELD,
    POLLER_LEASE_MINE,
    POLLER_QUIET_UNWOKEN,
    POLLER_SUCCESSOR_VACANT,
    POLLER_SUCCESSOR_IS_ME,
    POLLER_HANDOVER_OFFERABLE,
    POLLER_HANDOVER_OFFERED,
    POLLER_HANDOVER_UNANSWERED,
    API_RATE_IDLE,
    API_RATE_WITHIN_BURST,
    RUN_BUDGET_STALE,
    RUN_BUDGET_HAS_ROOM,
    RUN_BUDGET_STILL_IN,
    CALENDAR_IS_NEW,
    CALENDAR_NAME_FREED,
    CALENDAR_VERSION_IS,
    CALENDAR_IS_LIVE,
    CALENDAR_UNUSED,
    JOB_KEY_IS_FREE,
    TABLE_MODES_AS_READ,
)
