"""Renders docs/configuration.md from the settings themselves, so the reference cannot drift from the code.

``python -m duetime.settings_reference > docs/configuration.md`` writes it; a unit test fails when the
committed page differs from what this renders. Two tables: the environment variables the functions read
(``duetime.settings.Settings``, each field from ``DUETIME_<FIELD>``, described by its ``Field(description=
...)``), and the CDK context flags the stack takes (``StackConfig`` in infra/cdk/duetime_cdk/config.py,
described by the comments beside each field, or by a note here where a field has none).

Not for Lambda code: nothing the functions run imports this module. It needs pydantic only; the CDK part
reads ``duetime_cdk.config``, which imports pydantic and duetime, not aws-cdk-lib, and is left out when the
checkout's infra/cdk is not there (an installed package has none).
"""

from __future__ import annotations

import importlib
import io
import re
import sys
import tokenize
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from duetime.domain.partitions import group_label
from duetime.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CDK_DIR = ROOT / "infra" / "cdk"
CDK_CONFIG = CDK_DIR / "duetime_cdk" / "config.py"
ENV_PREFIX = "DUETIME_"

# Variables read outside Settings, by a tool rather than by the functions' wiring: where each is read and
# what it does. A test fails when the code reads a DUETIME_ variable that is neither a setting nor here.
OTHER_VARIABLES: dict[str, str] = {
    "DUETIME_URL": "The API the CLI's team commands talk to (`duetime jobs ...`), e.g. the stack's `ApiUrl` "
    "output; `--url` overrides it.",
    "DUETIME_TOKEN": "The team token the CLI sends; `--token` overrides it.",
    "DUETIME_LEAN_TRANSPORT": "`0` or `false` sends DynamoDB's and SQS's hot operations through botocore's "
    "own transport instead of the lean one (`adapters/aws/lean_transport.py`); on by default, off behind a "
    "proxy.",
    "DUETIME_STRICT_AWS_LIMITS": "`1` makes every client refuse a request AWS would refuse (item sizes, "
    "batch lengths) before it reaches an emulator that would take it (`adapters/aws/aws_limits.py`); "
    "`make run` and `make test` set it, production clients do without.",
    "DUETIME_DEPLOYED_PORT": "The port of the LocalStack `make deploy-local` deploys to (4610); the CLI's "
    "`--deployed-local` commands read it.",
    "DUETIME_DDB_DATA": "Where the DynamoDB Local that `duetime local` (or `make run`) starts keeps its "
    "tables: a folder, or `auto` (the default there: `.cache/local-data/<its name>`), so a restart keeps "
    "every job; unset (the tests), in memory.",
    "DUETIME_SECRET_": "A prefix: `duetime apply` fills a jobs file's `${DUETIME_SECRET_...}` header values "
    "from the variables so named (any other variable only when named with `--secret-env`).",
}

# CDK flags whose field in config.py has no comment of its own (or shares one with the field above it).
CDK_NOTES: dict[str, str] = {
    "stack_name": "The CloudFormation stack's name: letters, digits and hyphens, starting with a letter.",
    "deletion_protection": "Deletion protection on the tables, and `RETAIN` when the stack is deleted; "
    "false for a throwaway stack.",
    "partition_groups": "The poller groups, one per comma-separated range of the 64 partitions, or a number "
    "of equal groups (`16` is `0-3,4-7,...,60-63`): one poller function and rule per group.",
    "poller_helper_memory_mb": "The memory of the helper function a busy minute's holders start "
    "(1,769 MB is one vCPU: the helpers exist for their CPU).",
    "worker_max_concurrency": "The worker's SQS event source's `MaximumConcurrency` in standard mode.",
    "worker_batch_size": "The messages the event source hands a worker invocation at once (at most 10).",
    "table_busy_runs_per_minute": "With `capacity_mode=provisioned`, a minute with more due runs than this "
    "has the prescaler switch the tables to on demand 20-25 minutes ahead of it (set it to what the "
    "provisioned tables take in a minute).",
    "worker_max_pollers": "In provisioned mode, the most event pollers the mapping scales to: the worker's "
    "cap then (about 10 concurrent batches a poller), at least `worker_min_pollers`.",
    "peak_scale_up": "With `scheduled_scaling`, when the daily peak's workers are provisioned (UTC).",
    "peak_scale_down": "With `scheduled_scaling`, when they are lowered to `baseline_workers` (UTC).",
    "alert_email": "An address subscribed to the alerts topic (SNS sends it a confirmation e-mail).",
    "lambda_asset": "The functions' code: a finished build of `scripts/build_lambda.sh` (relative paths are "
    "from the repository root; `make lambda-assets` builds `build/lambda`).",
    "lambda_architecture": "The functions' architecture; unset, the one the asset's binary wheels are built "
    "for; set, it must be that one.",
    "allow_private_targets_on_aws": "Confirms `allow_private_targets` outside LocalStack: set on purpose, "
    "knowing every team's jobs may then reach the functions' network.",
    "api_rate_limit": "API Gateway's stage throttling: requests a second, steady.",
    "api_burst_limit": "API Gateway's stage throttling: the burst above the steady rate.",
    "forecast_pollers": "With `forecast_scaling`, the prescaler also switches the worker's SQS event source "
    "to provisioned mode ahead of a minute standard mode would not start within 60 s, and back to standard "
    "(`MaximumConcurrency` restored) once the queue has drained: the pollers a spike needs, bought for the "
    "spike only. Not with `worker_min_pollers`, which pins provisioned mode.",
    # The comment in config.py carries figures of an earlier default; the default itself is rendered beside.
    "warm_write_units": "DynamoDB warm throughput (`duetime.capacity.warm_throughput`): write units a second "
    "each "
    "table and index takes at once, e.g. `-c warm_write_units=runs:26000,jobs/due:17000` (names: `jobs`, "
    "`jobs/due`, `jobs/team-jobs`, `runs`, `runs/reap`, `control`); the names given replace their defaults, "
    "0 is none (a new table's 4,000). The defaults are what `duetime plan` says the seed's midnight asks of "
    "each table on the default stack. AWS charges once for raising it, and a raised value cannot be "
    "lowered. Left out with `localstack`.",
    "warm_read_units": "DynamoDB warm throughput for reads, as `warm_write_units` (0: a new table's 12,000).",
    "jobs_table": "Adopt an existing jobs table by name instead of creating one (a table restored from "
    'point-in-time recovery: docs/guide/operations.md, "Restore"). The stack grants its functions access '
    "to it and its indexes but does not manage it: its PITR, TTL and deletion protection are yours.",
    "runs_table": "Adopt an existing runs table by name, as `jobs_table`.",
    "control_table": "Adopt an existing control table by name, as `jobs_table`.",
}


def render() -> str:
    """The whole page, as docs/configuration.md holds it."""
    parts = [
        "# Configuration reference\n",
        "Generated from the code by `python -m duetime.settings_reference > docs/configuration.md`; "
        "`tests/unit/test_settings_reference.py` fails when this page and the code disagree. Edit the "
        "descriptions in `shared/duetime/settings.py` (and the comments in "
        "`infra/cdk/duetime_cdk/config.py`), not here.\n",
        "## Environment variables of the functions\n",
        "The poller, worker, API, prescaler and helper functions, `duetime local` and the operator commands "
        "read these (`Settings.from_env`): each setting from `DUETIME_<NAME>` when it is set. A deployed "
        "stack sets them for its functions from its CDK context flags (below); set them yourself only to run "
        "the code outside the stack. A value that does not parse, or lies outside its range, is refused "
        "with pydantic's message naming the setting.\n",
        _table(("Environment variable", "Type", "Default", "What it does"), _settings_rows()),
        "## Other environment variables\n",
        "Read by tools rather than by the functions' settings.\n",
        _table(
            ("Environment variable", "What it does"),
            ((f"`{k}`", v) for k, v in sorted(OTHER_VARIABLES.items())),
        ),
    ]
    config = _stack_config()
    if config is not None:
        parts += [
            "## CDK context flags of the stack\n",
            'Given as `-c key=value` (`make deploy CDK_ARGS="-c key=value ..."`) or in `cdk.json`; flags '
            "take `true`/`false`. An unknown key or a bad value stops the synth with a message naming it. "
            "What each construct does with them: [infra/cdk/README.md](../infra/cdk/README.md).\n",
            _table(("Context key", "Type", "Default", "What it does"), _stack_rows(config)),
        ]
    return "\n".join(parts)


def env_name(field: str) -> str:
    """The environment variable ``Settings.from_env`` reads a field from."""
    return f"{ENV_PREFIX}{field.upper()}"


def _settings_rows() -> Iterable[tuple[str, ...]]:
    for name, info in Settings.model_fields.items():
        yield (
            f"`{env_name(name)}`",
            _type(info),
            _default(info),
            info.description or "",
        )


def _stack_rows(config: type[BaseModel]) -> Iterable[tuple[str, ...]]:
    comments = field_comments(CDK_CONFIG.read_text(), config.__name__)
    for name, info in config.model_fields.items():
        yield (
            f"`{name}`",
            _type(info),
            _default(info),
            CDK_NOTES.get(name) or comments.get(name, ""),
        )


def _stack_config() -> type[BaseModel] | None:
    """``StackConfig``, imported from the checkout's infra/cdk (which holds no aws-cdk-lib import in
    config.py); None where there is no checkout."""
    if not CDK_CONFIG.is_file():
        return None
    if str(CDK_DIR) not in sys.path:
        sys.path.insert(0, str(CDK_DIR))
    module = importlib.import_module("duetime_cdk.config")
    config: type[BaseModel] = module.StackConfig
    return config


def field_comments(source: str, class_name: str) -> dict[str, str]:
    """Each field of a class's body with the comment lines right above it (no blank line between) and the
    comment at the end of its own line, joined into one sentence run. A field with neither is left out."""
    comments: dict[str, str] = {}
    in_class = False
    above: list[str] = []
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    inline = {tok.start[0]: tok.string for tok in tokens if tok.type == tokenize.COMMENT}
    for number, line in enumerate(source.splitlines(), start=1):
        if line.startswith(f"class {class_name}("):
            in_class = True
            continue
        if not in_class:
            continue
        if line and not line.startswith(" "):
            break  # the class has ended
        stripped = line.strip()
        if stripped.startswith("@"):
            break  # validators: no more fields
        if stripped.startswith("#"):
            above.append(stripped.lstrip("#").strip())
            continue
        match = re.match(r"    (\w+): ", line)
        if match:
            text = above[:]
            if number in inline and not stripped.startswith("#"):
                text.append(inline[number].lstrip("#").strip())
            if text:
                comments[match.group(1)] = " ".join(text).removeprefix("...").strip()
        above = []
    return comments


def _type(info: FieldInfo) -> str:
    text = _annotation(info.annotation)
    bounds = []
    for constraint in info.metadata:
        for attribute, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(constraint, attribute, None)
            if value is not None:
                bounds.append(f"{sign} {_number(value)}")
    return f"{text} ({', '.join(bounds)})" if bounds else text


def _annotation(annotation: Any) -> str:
    """A field's type as a reader of the table needs it: ``float | None`` is an optional float, a
    ``Literal`` its values."""
    if typing.get_origin(annotation) is typing.Literal:
        return " or ".join(f"`{value}`" for value in typing.get_args(annotation))
    arguments = typing.get_args(annotation)
    if type(None) in arguments and typing.get_origin(annotation) in (types.UnionType, typing.Union):
        (inner,) = (argument for argument in arguments if argument is not type(None))
        return f"{_annotation(inner)}, optional"
    if annotation is Path:
        return "path"
    if isinstance(annotation, type) and not isinstance(annotation, types.GenericAlias):
        return annotation.__name__
    return str(annotation)


def _default(info: FieldInfo) -> str:
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Path):
        value = value.relative_to(ROOT) if value.is_relative_to(ROOT) else value
        return f"`{value}`"
    if value == []:
        return "none"
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return f"`{group_label(value)}`"
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        return f"`{','.join(group_label(group) for group in value)}`"
    if isinstance(value, dict):
        return f"`{','.join(f'{k}:{v}' for k, v in value.items())}`" if value else "none"
    if value == "":
        return "empty"
    if isinstance(value, int | float):
        return f"`{_number(value)}`"
    return f"`{value}`"


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
