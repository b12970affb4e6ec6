"""The ``duetime`` command: the local system, the API from a terminal, the operator's team commands,
benchmarks, capacity plans and offline previews. One module a command group (each adds its parsers and
names the function that runs them); the flags every API command takes are declared once (``common``).

Exit codes: 0 success, 1 an error (one line on stderr), 2 bad usage (and for ``apply --dry-run --exit-code``,
a plan with changes).
"""

from __future__ import annotations

import argparse
import sys

from duetime import build_info
from duetime.cli import apply, calendars, drill, fires, installation, jobs, plan, restore, system, team, teams
from duetime.cli.common import UsageError
from duetime.cli.jobs import notify_channel, spec_from_args
from duetime.client import ApiFailure

__all__ = ["UsageError", "main", "notify_channel", "parser", "spec_from_args"]

GROUPS = (  # in the order `duetime --help` lists them
    system,
    installation,
    jobs,
    fires,
    apply,
    calendars,
    team,
    teams,
    plan,
    drill,
    restore,
)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="duetime", description="A distributed job scheduler.")
    root.add_argument("--version", action=VersionAction)
    commands = root.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_commands(commands)
    return root


class VersionAction(argparse.Action):
    """``duetime --version``: ``duetime 0.1.0 (commit 1a2b3c4)``. The commit is asked for only here, so no
    other command runs git."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and commit"
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"{parser.prog} {build_info.describe()}")
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except UsageError as exc:
        print(f"duetime: {exc}", file=sys.stderr)
        return 2
    except ApiFailure as exc:
        print(f"duetime: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # one line for people; the API's own errors are above
        print(f"duetime: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
