"""How late a spike nobody forecast starts on provisioned tables (``capacity_mode=provisioned``).

The prescaler switches the tables to on demand ahead of a spike it sees ``lead`` minutes before
(``duetime.scheduling.table_modes``). A spike written into the due index later than that (or a day's fifth,
which the tables meet on demand anyway) meets provisioned capacity: its claims are throttled and retried, the
due index keeps every job until its claim succeeds, and nothing is lost; the runs start late. This is the
arithmetic of how late, every figure a parameter with its source:

* until the switch takes effect the tables serve what provisioned mode leaves: the 30% auto scaling keeps
  free at its 70% target, plus the burst capacity DynamoDB keeps (up to 300 s of unused capacity: "DynamoDB
  currently retains up to five minutes (300 seconds) of unused read and write capacity", Developer Guide,
  "Burst capacity"), taken as full;
* the switch starts at the prescaler's next look, which sees the spike's own minute (at most 5 minutes, 2.5
  on average), and takes "several minutes" (AWS gives no bound: 5 assumed), meanwhile the previously
  provisioned throughput ("Considerations when switching capacity modes");
* on demand, the tables take at once their previous peak (a daily spike's) or their warm throughput: the
  rest of the spike starts at ``on_demand_runs_per_s``.

Auto scaling alone would take longer: its alarm needs two minutes above target and each step adds at most
what it measured consumed over 70% (consumed is capped by the throttling), so it grows ~1.4x every few
minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BURST_SECONDS = 300.0  # DynamoDB's burst capacity: up to 300 s of unused capacity
FREE_SHARE = 0.30  # what auto scaling's 70% target leaves free


@dataclass(frozen=True)
class UnforeseenSpike:
    spike_runs: int
    write_units_per_run: float
    provisioned_wcu: float  # the tables' and indexes' provisioned write units, together
    on_demand_runs_per_s: float  # what the tables start on demand (their previous peak or warm throughput)
    look_wait_s: float = 300.0  # the prescaler's next look, at worst
    switch_s: float = 300.0  # AWS: "several minutes" (assumed 5)

    def delay(self) -> dict[str, Any]:
        """Seconds until the last run of the spike starts (its lateness), and how many started before the
        switch took effect."""
        free_wru_per_s = self.provisioned_wcu * FREE_SHARE
        burst_wru = self.provisioned_wcu * FREE_SHARE * BURST_SECONDS
        before_s = self.look_wait_s + self.switch_s
        served_before = min(
            float(self.spike_runs), (burst_wru + free_wru_per_s * before_s) / self.write_units_per_run
        )
        if served_before >= self.spike_runs:
            last_start_s = (self.spike_runs * self.write_units_per_run - burst_wru) / free_wru_per_s
            return {
                "last_run_late_s": round(max(0.0, last_start_s), 1),
                "runs_started_before_the_switch": self.spike_runs,
                "switched": False,
            }
        rest_s = (self.spike_runs - served_before) / self.on_demand_runs_per_s
        return {
            "last_run_late_s": round(before_s + rest_s, 1),
            "runs_started_before_the_switch": round(served_before),
            "switched": True,
            "assumed": {"look_wait_s": self.look_wait_s, "switch_s": self.switch_s},
        }
