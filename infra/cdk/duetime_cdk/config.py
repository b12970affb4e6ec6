"""Stack settings, from CDK context, validated with pydantic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from duetime.settings import parse_partitions

ROOT = Path(__file__).resolve().parents[3]


class StackConfig(BaseModel):
    deletion_protection: bool = True
    partition_groups: list[list[int]] = Field(
        default_factory=lambda: [list(range(i, i + 16)) for i in range(0, 64, 16)]
    )
    worker_max_concurrency: int = Field(default=100, ge=2, le=1000)
    worker_batch_size: int = Field(default=10, ge=1, le=10)
    peak_workers: int = Field(default=90, ge=1, le=1000)
    peak_scale_up: str = "cron(55 23 * * ? *)"
    peak_scale_down: str = "cron(15 0 * * ? *)"
    alert_email: str | None = None
    lambda_asset: Path = ROOT / "build" / "lambda"
    scheduled_scaling: bool = True  # off on LocalStack (Application Auto Scaling for Lambda is not there)
    allow_private_targets: bool = False  # SSRF guard; only for LocalStack smoke tests
    api_rate_limit: int = Field(default=100, ge=1)
    api_burst_limit: int = Field(default=200, ge=1)

    @field_validator("partition_groups", mode="before")
    @classmethod
    def _groups(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [parse_partitions(group) for group in value.split(",")]
        return value

    @field_validator("partition_groups")
    @classmethod
    def _cover_all_once(cls, groups: list[list[int]]) -> list[list[int]]:
        flat = sorted(p for g in groups for p in g)
        if flat != list(range(64)):
            raise ValueError("partition_groups must cover partitions 0-63, each exactly once")
        return groups

    @classmethod
    def from_context(cls, node: Any) -> StackConfig:
        values = {name: node.try_get_context(name) for name in cls.model_fields}
        for flag in ("deletion_protection", "scheduled_scaling", "allow_private_targets"):
            if isinstance(values.get(flag), str):
                values[flag] = values[flag].lower() == "true"
        return cls.model_validate({k: v for k, v in values.items() if v is not None})


def group_label(partitions: list[int]) -> str:
    return f"{partitions[0]}-{partitions[-1]}"
