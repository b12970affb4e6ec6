"""A partition group's poller life: invocations that overlap, and one lease that says which of them claims.

EventBridge starts an invocation of a group's poller every minute, at whatever second it likes, and each
runs ``run_seconds`` (more than a minute), so two or three are alive at once. They share one lease item in
the control table (``("poller#<group>", "lease")``, ``duetime.ports.PollerLeaseStore``), and every instant
they compare is the store's clock:

* **holder**: claims (preloaded timers and sweeps) from the lease's ``since`` until the lease expires or it
  hands over; renews the lease every ``renew_every`` s to ``lease_seconds`` ahead, and claims nothing in the
  last ``expiry_guard`` s before the expiry it knows of.
* **standby**: claims nothing, keeps the coming minute preloaded, reads the lease every ``standby_poll`` s,
  registers as the one successor when there is none and its preload is ready (the current minute loaded,
  and the coming one within its lead), and takes the lease when it is free or expired: a holder that died
  (stopped renewing) is replaced within ``lease_seconds`` and a poll, by a standby if one is alive, else by
  the next invocation when it starts.
* **handover**: the holder offers the lease to the registered successor as soon as it sees one at a
  renewal, unless the minute or the next is busy (``Poller.busy``) or the stack keeps a hot standby
  (``hot_standby``); then only ``retire_before`` s before its run ends. Early, an invocation lives about a
  minute and a few seconds (one alive at most instants, half the Lambda time); at the end, about two are
  alive and a dead holder's standby is already there. The holder offers the lease to the registered
  successor from a whole second X at least ``handover_lead`` s ahead, and from then on claims nothing at
  or after X - ``stop_guard``. The successor accepts with one conditional write that makes it the holder
  from X, waits for X and starts there: it drops the preloaded rows due before X (the old holder's) and
  fires and sweeps from X. At X - ``decide_before`` the old holder reads the lease. Accepted: it ends at X.
  Not accepted (the successor died): it withdraws the offer, which a late acceptance can no longer beat,
  keeps the lease and offers it again to the next standby that registers.
* **end**: a holder with nobody to hand over to gives the lease back ``release_before`` s before its run
  ends (the next invocation takes it at once); a standby whose run ends withdraws its registration.

So at any instant at most one invocation claims a group, and the windows of consecutive holders meet at
whole seconds. A holder that paused and wakes late claims nothing: its own view of its window has closed,
and its next renewal fails. A claim already sent when it paused is still safe: it creates a run only if
the run row is new (RUN_IS_NEW) and the job's version is the one it read (JOB_UNCHANGED_SINCE_READ), and
whoever claims first moves that version, so a job is claimed once per due time whoever holds the lease.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, ParamSpec, TypeVar

from duetime.domain.partitions import group_label
from duetime.domain.timeutil import ceil_seconds
from duetime.ports import PollerLease, PollerLeaseStore
from duetime.ports.functions import HelperAssignment, WorkerWarmer
from duetime.ports.metrics import MetricsSink, add_counts
from duetime.scheduling.fan_out import FanOutSetting
from duetime.scheduling.poller import ClaimReport, ClaimWindow, Poller, RecoveryReport
from duetime.scheduling.poller_metrics import record_fire, record_poll, record_poller_error
from duetime.scheduling.preload import FireReport
from duetime.scheduling.quiet import QuietTimings, QuietWatch
from duetime.scheduling.warmup import warm_before_loaded_minutes

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


def invocation_id(prefix: str = "local") -> str:
    """A name no other invocation has. On Lambda the prefix is the request id, but the request id alone is
    not enough: an asynchronous event may be delivered more than once (LocalStack's own client retries a
    long invocation with the same id), and two invocations under one name would both hold the lease."""
    return f"{prefix}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaseTimings:
    """The lease's timing, in seconds (see the module's docstring for what each one does)."""

    lease_seconds: float = 6.0
    renew_every: float = 2.0
    standby_poll: float = 0.5
    handover_lead: float = 2.0
    decide_before: float = 0.5
    stop_guard: float = 0.2
    expiry_guard: float = 1.0
    retire_before: float = 12.0
    release_before: float = 2.0
    # True: the next invocation waits as a hot standby for most of the holder's run (a dead holder is
    # replaced within ``lease_seconds``, at twice the Lambda time); False: the holder hands over as soon as
    # the next one is ready, except in a busy minute (the dead holder of a quiet minute waits for the next
    # invocation, up to a minute).
    hot_standby: bool = False

    def __post_init__(self) -> None:
        if self.lease_seconds <= self.handover_lead + 1 or self.lease_seconds <= self.renew_every:
            raise ValueError("a lease must outlast a renewal interval and a handover's lead")
        if not self.stop_guard < self.decide_before < self.handover_lead:
            raise ValueError("the holder decides after it stopped offering and before the handover")

    def __call__(self, name: str) -> timedelta:
        value: float = getattr(self, name)
        return timedelta(seconds=value)


class Role(StrEnum):
    STANDBY = "standby"
    HOLDER = "holder"
    DONE = "done"


class GroupLease:
    """One invocation's side of its partition group's lease: the ``ClaimGate`` its poller loop asks.

    ``step(now)`` makes the lease writes that have come due; ``window()`` is what the invocation may claim.
    ``ends_at`` is when the invocation's run ends (None: never, as in ``duetime local``). ``ready(now)``: may
    it register as the successor (its poller has the minutes it would fire loaded); ``busy()``: is its
    minute busy, so that it keeps a successor waiting as a hot standby rather than handing over early."""

    def __init__(
        self,
        store: PollerLeaseStore,
        group: str,
        me: str,
        ends_at: datetime | None,
        timings: LeaseTimings | None = None,
        ready: Callable[[datetime], bool] = lambda now: True,
        busy: Callable[[], bool] = lambda: False,
        stand_by: bool = True,
    ) -> None:
        self.store = store
        self.group = group
        self.me = me
        self.ends_at = ends_at
        self.t = timings or LeaseTimings()
        self.ready = ready
        self.busy = busy
        self.stand_by = stand_by  # False (a woken invocation): end at once if another holds the lease
        self.role = Role.STANDBY
        self.term = 0
        self.reigns: list[ClaimWindow] = []  # the windows this invocation held, once they ended
        self.handovers = 0  # times it handed the lease to a successor
        self.takeovers = 0  # times it took over a lease whose holder had stopped renewing
        self.store_calls = 0  # lease reads and writes that answered
        self.rested = False  # gave the lease back because the group was quiet (``duetime.scheduling.quiet``)
        self._since: datetime | None = None
        self._expires: datetime | None = None
        self._offer: datetime | None = None  # the second the lease is offered at, while the offer may stand
        self._until: datetime | None = None  # the reign's end once the handover was accepted
        self._registered = False
        self._next: datetime | None = None  # the next step (None: at once)
        self._next_renew: datetime | None = None

    # --- what the poller loop asks ------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.role is Role.DONE

    def window(self) -> ClaimWindow | None:
        if self.role is not Role.HOLDER or self._since is None or self._expires is None:
            return None
        ends = [self._expires - self.t("expiry_guard")]
        ends += [at for at in (self._offer, self._until) if at is not None]
        if self.ends_at is not None:
            ends.append(self.ends_at - self.t("release_before"))
        return ClaimWindow(self._since, min(ends) - self.t("stop_guard"))

    def next_step_at(self) -> datetime | None:
        return None if self.role is Role.DONE else self._next

    def step(self, now: datetime) -> None:
        if self.role is Role.DONE or (self._next is not None and now < self._next):
            return
        if self.role is Role.HOLDER:
            self._hold(now)
        else:
            self._wait(now)

    def close(self, now: datetime) -> None:
        """The run is over (or stopped): claim nothing more, give the lease back if it is still this
        invocation's (and not handed over), or withdraw a registration as successor. A write that fails here
        is only logged: the lease then expires, and a registration is withdrawn by the holder's next offer."""
        try:
            if self.role is Role.HOLDER:
                handed_over = self._until is not None
                self._end_reign(now, Role.DONE)
                if not handed_over:
                    self._call(self.store.release_poller_lease, self.group, self.me)
                    log.info("poller lease released", extra=self._extra())
            elif self._registered:
                self._registered = False
                self._call(self.store.withdraw_poller_successor, self.group, self.me)
        except Exception:
            log.warning("giving the poller lease up failed; it expires by itself", exc_info=True)
        self.role = Role.DONE

    def rest(self, now: datetime, wakes_seen: int) -> bool:
        """The group is quiet (``duetime.scheduling.quiet``): give the lease back under POLLER_QUIET_UNWOKEN
        and be done, unless a handover is under way. True if it gave the lease back; False (woken meanwhile,
        or handing over) leaves the holder as it was. Asked between ticks only: nothing is being claimed."""
        if self.role is not Role.HOLDER or self._offer is not None or self._until is not None:
            return False
        if not self._call(self.store.release_quiet_poller_lease, self.group, self.me, wakes_seen):
            return False
        self.rested = True
        self._end_reign(now, Role.DONE)
        log.info("poller group quiet: lease given back until the next tick", extra=self._extra())
        return True

    # --- standby ------------------------------------------------------------------------------------------

    def _wait(self, now: datetime) -> None:
        t = self.t
        if self.ends_at is not None and now >= self.ends_at - t("release_before"):
            self.close(now)
            return
        self._next = now + t("standby_poll")  # also when a call below raises: try again after a poll
        lease = self._call(self.store.read_poller_lease, self.group)
        if lease.holder == self.me and not lease.free_at(now):
            self._hold_from(lease, now)  # a write of ours whose answer was lost made us the holder
            return
        if not self.stand_by and not lease.free_at(now):
            # woken, but someone holds the group: it saw the wake (``duetime.scheduling.wake``)
            self.close(now)
            return
        fit = self.ends_at is None or self.ends_at - now > t("retire_before") + 2 * t("handover_lead")
        if lease.free_at(now):
            taken = self._call(
                self.store.acquire_poller_lease, self.group, self.me, now, now + t("lease_seconds")
            )
            if taken is not None:
                if lease.holder not in (None, self.me):
                    self.takeovers += 1
                    log.warning(
                        "poller lease taken over from a holder that stopped renewing", extra=self._extra()
                    )
                self._hold_from(taken, now)
        elif lease.successor == self.me and lease.handover_at is not None and lease.holder is not None:
            if not fit:
                self._withdraw_registration()
                return
            at = lease.handover_at
            until = at + t("lease_seconds")
            taken = self._call(self.store.accept_poller_lease, self.group, self.me, lease.holder, at, until)
            if taken is not None:
                self._hold_from(taken, now)
                log.info("poller lease accepted", extra=self._extra())
        elif lease.successor is None and fit and self.ready(now):
            self._registered = (
                self._call(self.store.register_poller_successor, self.group, self.me) is not None
            )
        elif lease.successor == self.me and not fit:
            self._withdraw_registration()
        else:
            self._registered = lease.successor == self.me

    def _withdraw_registration(self) -> None:
        self._call(self.store.withdraw_poller_successor, self.group, self.me)
        self._registered = False

    def _hold_from(self, lease: PollerLease, now: datetime) -> None:
        self.role = Role.HOLDER
        self.term = lease.term
        self._since = lease.since or now
        self._expires = lease.expires_at
        self._offer = self._until = None
        self._registered = False
        self._next_renew = max(now, self._since) + self.t("renew_every")
        self._next = self._holder_next(now)
        log.info("poller lease held", extra=self._extra())

    # --- holder -------------------------------------------------------------------------------------------

    def _hold(self, now: datetime) -> None:
        t = self.t
        if self._until is not None:  # handed over: claim up to the agreed second, then end
            window = self.window()
            if window is None or now >= window.end:
                self._end_reign(now, Role.DONE)
            else:
                self._next = window.end
            return
        if self._offer is not None:
            if now >= self._offer - t("decide_before"):
                self._decide(now)
        elif self.ends_at is not None and now >= self.ends_at - t("release_before"):
            self.close(now)
            return
        elif self.ends_at is not None and now >= self.ends_at - t("retire_before"):
            self._retire(now)
        elif self._next_renew is None or now >= self._next_renew:
            renewed = self._renew(now)
            if renewed is not None and renewed.successor is not None and self._hands_over_early():
                self._offer_to(renewed.successor, now)
        if self.role is Role.HOLDER:
            self._next = self._holder_next(now)

    def _holder_next(self, now: datetime) -> datetime:
        t = self.t
        if self._until is not None:
            window = self.window()
            return window.end if window is not None else now
        if self._offer is not None:
            return self._offer - t("decide_before")
        candidates = [self._next_renew or now]
        if self.ends_at is not None:
            retire = self.ends_at - t("retire_before")
            candidates += [
                retire if now < retire else now + t("standby_poll"),
                self.ends_at - t("release_before"),
            ]
        return min(candidates)

    def _renew(self, now: datetime) -> PollerLease | None:
        """Renew the lease; the lease as renewed (it names a registered successor), or None if it was lost."""
        self._next_renew = now + self.t("standby_poll")  # if the write raises: try again soon
        until = now + self.t("lease_seconds")
        renewed = self._call(self.store.renew_poller_lease, self.group, self.me, now, until)
        if renewed is None:
            self._lost(now)
            return None
        self._expires = renewed.expires_at
        self._next_renew = now + self.t("renew_every")
        return renewed

    def _hands_over_early(self) -> bool:
        """Hand the lease to a ready successor now rather than at the end of the run: unless the stack keeps a
        hot standby, or the minute is busy (a dead holder's standby should be there when most runs are
        due). Either way there is one handover per invocation; only the overlap changes."""
        return not self.t.hot_standby and not self.busy()

    def _retire(self, now: datetime) -> None:
        """Look for the registered successor and offer it the lease; until one registers, keep renewing."""
        lease = self._call(self.store.read_poller_lease, self.group)
        if lease.holder != self.me or lease.free_at(now):
            self._lost(now)
            return
        if lease.successor is None:
            if self._next_renew is None or now >= self._next_renew:
                self._renew(now)
            return
        self._offer_to(lease.successor, now)

    def _offer_to(self, successor: str, now: datetime) -> None:
        """Offer the lease to the registered ``successor`` from the next whole second ``handover_lead`` on."""
        at = ceil_seconds(now + self.t("handover_lead"))
        self._offer = at  # before the write: if its answer is lost, the holder still stops before ``at``
        until = now + self.t("lease_seconds")
        offered = self._call(self.store.offer_poller_lease, self.group, self.me, successor, at, now, until)
        if offered is None:
            self._offer = None  # the successor or the lease changed meanwhile: look again next step
            return
        self._expires = offered.expires_at
        self._next_renew = now + self.t("renew_every")
        log.info("poller lease offered", extra={**self._extra(), "successor": successor, "at": str(at)})

    def _decide(self, now: datetime) -> None:
        """Shortly before the offered second: end there if the successor accepted, else withdraw."""
        assert self._offer is not None
        lease = self._call(self.store.read_poller_lease, self.group)
        if lease.holder != self.me:
            self._until = self._offer  # accepted (or, had our lease expired, lost): no claim from here on
            if lease.since == self._offer and lease.holder is not None:
                self.handovers += 1
                log.info("poller lease handed over", extra={**self._extra(), "successor": lease.holder})
            return
        if lease.handover_at != self._offer:  # the offer never landed, or the successor withdrew
            self._offer = None
            return
        withdrawn = self._call(self.store.withdraw_poller_offer, self.group, self.me, self._offer)
        if withdrawn is None:
            self._next = now  # accepted just now: read again at once
            return
        log.warning("poller lease offer not accepted in time; kept", extra=self._extra())
        self._offer = None
        self._expires = withdrawn.expires_at

    def _lost(self, now: datetime) -> None:
        """The lease is not ours any more (it expired, say while we were paused): claim nothing more, and
        wait as a standby (which takes it again if nobody else did)."""
        log.warning("poller lease lost", extra=self._extra())
        self._end_reign(now, Role.STANDBY)
        self._next = None

    def _end_reign(self, now: datetime, role: Role) -> None:
        window = self.window()
        if window is not None:
            self.reigns.append(ClaimWindow(window.start, max(window.start, min(window.end, now))))
        self.role = role
        self._since = self._expires = self._offer = self._until = None

    # --- helpers ------------------------------------------------------------------------------------------

    def _call(self, method: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """A lease read or write, counted once it answered."""
        result = method(*args, **kwargs)
        self.store_calls += 1
        return result

    def _extra(self) -> dict[str, Any]:
        return {"group": self.group, "invocation": self.me, "term": self.term, "role": self.role.value}


@dataclass
class ShiftReport:
    """What one invocation did: its sweeps and errors, and the windows in which it held the group."""

    group: str
    invocation: str
    partitions: list[int]
    sweeps: int = 0
    errors: int = 0
    reigns: list[ClaimWindow] = field(default_factory=list)
    handovers: int = 0
    takeovers: int = 0
    rested: bool = False  # the group was quiet: the lease was given back until the next tick
    woken_while_held: bool = False  # a wake found a holder there and returned at once
    quiet_looks: int = 0

    def held_seconds(self) -> float:
        return sum((r.end - r.start).total_seconds() for r in self.reigns)

    def summary(self) -> dict[str, Any]:
        return {
            "ticks": self.sweeps,
            "errors": self.errors,
            "partitions": self.partitions,
            "group": self.group,
            "held_seconds": round(self.held_seconds(), 3),
            "handovers": self.handovers,
            "takeovers": self.takeovers,
            "rested": self.rested,
            "woken_while_held": self.woken_while_held,
        }


class ShiftFailed(RuntimeError):
    """The invocation got nothing done: it held the group and every sweep failed, or no lease call
    succeeded."""


@dataclass
class PollerShift:
    """The poller and its group lease, as one invocation (or ``duetime local``'s poller thread) serves."""

    poller: Poller
    leases: PollerLeaseStore
    timings: LeaseTimings = field(default_factory=LeaseTimings)
    interval: float = 1.0
    # warms a worker before each loaded minute (``duetime.scheduling.warmup``)
    warmer: WorkerWarmer | None = None
    # rest when the group is quiet (``duetime.scheduling.quiet``); None: never
    quiet: QuietTimings | None = None

    def fan_out_setting(self) -> FanOutSetting:
        """The fan-out this shift's group invocations run with (``Poller.fan_out_setting``)."""
        return self.poller.fan_out_setting()

    def serve(
        self,
        invocation: str,
        partitions: Sequence[int] | None,
        run_seconds: float | None,
        sleep: Callable[[float], object],
        stop: Callable[[], bool] = lambda: False,
        metrics: MetricsSink | None = None,
        wake: bool = False,
    ) -> ShiftReport:
        """Serve ``partitions`` (default: the poller's) for ``run_seconds`` (None: until ``stop()``): wait as
        a standby, hold the group's lease when it comes, hand it over at the end, or give it back early when
        the group is quiet (``quiet``, only for a run with an end: the next tick comes). ``wake``: an
        invocation a job write started (``duetime.scheduling.wake``), which returns at once if the group has a
        holder. Raises ``ShiftFailed`` when nothing got done: it held the group and not one sweep succeeded,
        or not one lease call did."""
        poller = self.poller.for_partitions(partitions) if partitions else self.poller
        now = poller.clock.now()
        ends_at = None if run_seconds is None else now + timedelta(seconds=max(0.0, run_seconds))
        group = group_label(poller.config.partitions)
        return self._serve(poller, group, invocation, ends_at, sleep, stop, metrics, wake, self.quiet)

    def serve_helper(
        self,
        invocation: str,
        assignment: HelperAssignment,
        sleep: Callable[[float], object],
        metrics: MetricsSink | None = None,
        stop: Callable[[], bool] = lambda: False,
    ) -> ShiftReport:
        """A helper's run (``duetime.scheduling.fan_out``): hold the slice's own lease
        (``assignment.lease_name``), claim the slice's partitions (preload, fire, sweep, reap) up to
        ``serve_until``, and give the lease back as soon as the assigned minute is over and a sweep found
        nothing of the slice due (or ``stop()``)."""
        poller = self.poller.alone(assignment.partitions, assignment.claims_per_second)
        minute_over = assignment.minute + timedelta(minutes=1)
        last_due: list[int] = []

        def minute_claimed() -> bool:
            held = poller.preload.held_rows if poller.preload is not None else 0
            if stop():
                return True
            return poller.clock.now() >= minute_over and last_due[-1:] == [0] and not held

        return self._serve(
            poller,
            assignment.lease_name,
            invocation,
            assignment.serve_until,
            sleep,
            minute_claimed,
            metrics,
            False,
            None,
            on_sweep=lambda claimed: last_due.append(claimed.due_rows),
        )

    def _serve(
        self,
        poller: Poller,
        group: str,
        invocation: str,
        ends_at: datetime | None,
        sleep: Callable[[float], object],
        stop: Callable[[], bool],
        metrics: MetricsSink | None,
        wake: bool,
        quiet: QuietTimings | None,
        on_sweep: Callable[[ClaimReport], None] | None = None,
    ) -> ShiftReport:
        """Open the group's lease (a woken invocation returns at once if the group has a holder), run the
        poller's loop inside it with the observers of its fires and sweeps, close the lease, and report."""
        now = poller.clock.now()
        gate = GroupLease(
            self.leases,
            group,
            invocation,
            ends_at,
            self.timings,
            poller.ready_to_hold,
            poller.busy,
            stand_by=not wake,
        )
        report = ShiftReport(group, invocation, list(poller.config.partitions))
        if wake and not self.leases.read_poller_lease(group).free_at(now):
            report.woken_while_held = True  # the usual case: returned before the poller did anything
            return report
        errors: list[Exception] = []

        def failed(error: Exception) -> None:
            errors.append(error)
            if metrics is not None:
                record_poller_error(metrics)

        watch = None
        if quiet is not None and ends_at is not None:
            watch = QuietWatch(poller, self.leases, group, invocation, quiet)
        on_fire, on_report = self._fire_observer(metrics, watch), _sweep_observer(metrics, watch, on_sweep)
        stop_or_rest = _stop_or_rest(stop, watch, gate, poller)
        try:
            report.sweeps = poller.run_until(
                stop=stop_or_rest,
                sleep=sleep,
                interval=self.interval,
                on_report=on_report,
                on_fire=on_fire,
                on_error=failed,
                gate=gate,
            )
        finally:
            gate.close(poller.clock.now())
        _complete_report(report, gate, watch, errors, metrics)
        return report

    def _fire_observer(
        self, metrics: MetricsSink | None, watch: QuietWatch | None
    ) -> Callable[[FireReport], None] | None:
        """The loop's ``on_fire``: the fires go to the metrics, the worker warmer and the quiet watch (those
        there are); None when there are none."""
        observers: list[Callable[[FireReport], None]] = []
        if metrics is not None:
            observers.append(lambda fired: record_fire(metrics, fired))
        if self.warmer is not None:
            observers.append(warm_before_loaded_minutes(self.warmer, _warmup_failed))
        if watch is not None:
            observers.append(watch.saw_fire)
        if not observers:
            return None

        def on_fire(fired: FireReport) -> None:
            for observe in observers:
                observe(fired)

        return on_fire


def _sweep_observer(
    metrics: MetricsSink | None, watch: QuietWatch | None, on_sweep: Callable[[ClaimReport], None] | None
) -> Callable[[ClaimReport, RecoveryReport | None], None] | None:
    """The loop's ``on_report``: the sweeps go to ``on_sweep``, the metrics and the quiet watch (those there
    are); None when there are none."""
    observers: list[Callable[[ClaimReport, RecoveryReport | None], None]] = []
    if on_sweep is not None:
        observers.append(lambda claimed, _: on_sweep(claimed))
    if metrics is not None:
        observers.append(lambda claimed, recovered: record_poll(metrics, claimed, recovered))
    if watch is not None:
        observers.append(lambda claimed, _: watch.saw_sweep(claimed))
    if not observers:
        return None

    def on_report(claimed: ClaimReport, recovered: RecoveryReport | None) -> None:
        for observe in observers:
            observe(claimed, recovered)

    return on_report


def _stop_or_rest(
    stop: Callable[[], bool], watch: QuietWatch | None, gate: GroupLease, poller: Poller
) -> Callable[[], bool]:
    """The loop's ``stop`` (asked between ticks): ``stop()``, or a holder whose group the quiet ``watch``
    saw quiet gave the lease back (``GroupLease.rest``); a release refused (a wake came) looks again later."""

    def stop_or_rest() -> bool:
        if stop():
            return True
        if watch is None or gate.role is not Role.HOLDER:
            return False
        wakes = watch.wakes_to_keep(poller.clock.now())
        if wakes is None:
            return False
        if gate.rest(poller.clock.now(), wakes):
            return True
        watch.woken(poller.clock.now())
        return False

    return stop_or_rest


def _complete_report(
    report: ShiftReport,
    gate: GroupLease,
    watch: QuietWatch | None,
    errors: list[Exception],
    metrics: MetricsSink | None,
) -> None:
    """Complete ``report`` from the closed lease and the quiet watch, and count the shift in ``metrics``.
    Raises ``ShiftFailed`` when nothing got done: it held the group and not one sweep succeeded, or not one
    lease call did."""
    report.errors = len(errors)
    report.reigns, report.handovers, report.takeovers = gate.reigns, gate.handovers, gate.takeovers
    report.rested, report.quiet_looks = gate.rested, watch.looks if watch is not None else 0
    if metrics is not None:
        add_counts(metrics, {"PollerHandovers": report.handovers, "PollerTakeovers": report.takeovers})
        add_counts(metrics, {"PollerHeldSeconds": report.held_seconds()}, unit="Seconds")
    if errors and not report.sweeps and (report.reigns or not gate.store_calls):
        raise ShiftFailed(f"every poller tick of the invocation failed ({len(errors)} errors)") from errors[
            -1
        ]


def _warmup_failed(error: Exception) -> None:
    log.warning("warming a worker failed: %s", error)
