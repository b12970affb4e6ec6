"""Stack settings, from CDK context, validated with pydantic."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from duetime.settings import parse_partitions

ROOT = Path(__file__).resolve().parents[3]
WHEEL_ARCHITECTURES = {"aarch64": "arm64", "x86_64": "x86_64"}  # a wheel's platform tag -> Lambda's name


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
    # The code asset (relative paths are from the repository root) and the architecture it was built for:
    # unset, the one its binary wheels name; set, it must be that one.
    lambda_asset: Path = Field(default=ROOT / "build" / "lambda", validate_default=True)
    lambda_architecture: Literal["arm64", "x86_64"] = "arm64"
    # A LocalStack (community) deployment: leaves out what LocalStack cannot create or run: the API
    # Gateway Lambda authorizer (the api function checks tokens itself), the dashboard, scheduled scaling.
    localstack: bool = False
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

    @field_validator("lambda_asset")
    @classmethod
    def _built(cls, path: Path) -> Path:
        path = path if path.is_absolute() else ROOT / path
        if not (path / ".built").is_file():
            raise ValueError(
                f"{path} holds no finished Lambda build (no .built): build it with scripts/build_lambda.sh "
                "(`make lambda-assets` builds build/lambda)"
            )
        return path

    @model_validator(mode="after")
    def _consistent(self) -> StackConfig:
        built_for = asset_architectures(self.lambda_asset)
        if "lambda_architecture" not in self.model_fields_set and len(built_for) == 1:
            (self.lambda_architecture,) = built_for  # unset: what the asset is built for
        if built_for and built_for != {self.lambda_architecture}:
            raise ValueError(
                f"lambda_asset {self.lambda_asset} holds wheels for {', '.join(sorted(built_for))}, "
                f"but lambda_architecture is {self.lambda_architecture}"
            )
        if self.localstack:
            if "scheduled_scaling" in self.model_fields_set and self.scheduled_scaling:
                raise ValueError(
                    "scheduled_scaling needs Application Auto Scaling for Lambda, which LocalStack community "
                    "does not have: leave it unset (or false) with localstack=true"
                )
            self.scheduled_scaling = False
        return self

    @property
    def team_authorizer(self) -> bool:
        """API Gateway's TOKEN authorizer in front of /v1 (LocalStack community never runs one)."""
        return not self.localstack

    @property
    def dashboard(self) -> bool:
        """The CloudWatch dashboard (LocalStack community cannot create one)."""
        return not self.localstack

    @classmethod
    def from_context(cls, node: Any) -> StackConfig:
        """``-c key=value`` gives strings: pydantic parses them ("true"/"false" for flags, numbers), and
        refuses what does not parse."""
        values = {name: node.try_get_context(name) for name in cls.model_fields}
        return cls.model_validate({k: v for k, v in values.items() if v is not None})


def asset_architectures(asset: Path) -> set[str]:
    """The Lambda architectures the asset's binary wheels were built for (empty if it has none)."""
    found = set()
    for wheel in asset.glob("*.dist-info/WHEEL"):
        for line in wheel.read_text().splitlines():
            if line.startswith("Tag:"):
                platform = line.split("-")[-1].strip()
                found |= {name for tag, name in WHEEL_ARCHITECTURES.items() if platform.endswith(f"_{tag}")}
    return found
