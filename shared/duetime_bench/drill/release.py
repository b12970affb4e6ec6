"""A release for the upgrade drill: its Lambda asset and CloudFormation template, built from git by that
release's own build (its ``make lambda-assets-local`` and its ``infra/cdk/app.py``, run with this checkout's
virtualenv: the dependencies are the same), and deployed into the deployed-stack LocalStack with the CDK's
own tooling (``cdklocal``), in place.

An older release is checked out with ``git worktree add --detach`` under ``.cache/drill/<commit>/src`` (kept
and reused: a commit's build never changes), so that its asset is stamped with its own commit. The current
release is this checkout as it is (uncommitted changes included: its asset says ``-dirty``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from duetime.upgrades.releases import resolve_ref

ROOT = Path(__file__).resolve().parents[3]
STACK = "Duetime"
# What scripts/deploy_local.sh synthesizes with (a release's own script is read first: _context_of).
DEFAULT_CONTEXT = {
    "localstack": True,
    "lambda_asset": "build/lambda-local",
    "deletion_protection": False,
    "allow_private_targets": True,
    "aws_targets_without_role": True,
}
_CONTEXT = re.compile(r"CDK_CONTEXT_JSON='([^']*)'", re.S)
_FAILED = re.compile(r"(CREATE|UPDATE|DELETE)_FAILED\s+\|\s+(\S+)\s+\|\s+(.*)$")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Release:
    ref: str  # as asked: a tag, a commit, "main~3", or "current"
    commit: str  # the full sha ("" for the current checkout's uncommitted state: see label)
    label: str  # what to call it in a report: the short sha, or "current (<sha>[-dirty])"
    source: Path  # the tree it was built from
    assembly: Path  # the synthesized cloud assembly (template and staged asset)


@dataclass
class Deploy:
    """One ``cdklocal deploy`` of a release: how long it took and how it ended."""

    release: str
    ok: bool
    seconds: float
    stack_status: str
    failed: list[str] = field(default_factory=list)  # "<logical id> <type>: <reason>" of failed resources
    log: str = ""  # the deploy's log file

    def as_dict(self) -> dict[str, Any]:
        return {
            "release": self.release,
            "ok": self.ok,
            "seconds": round(self.seconds, 1),
            "stack_status": self.stack_status,
            "failed": self.failed,
            "log": self.log,
        }


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def python() -> str:
    """This checkout's virtualenv's python (the one running the drill)."""
    return sys.executable


def _run(command: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> None:
    with log.open("w") as out:
        done = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}) in {cwd}; {log}:\n{tail}")


def _clean_env(endpoint: str | None = None) -> dict[str, str]:
    """The environment for builds and deploys: no emulator endpoints of the tests leaking in, dummy
    credentials, and (for a deploy) this LocalStack."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env.update(
        AWS_ACCESS_KEY_ID="test",
        AWS_SECRET_ACCESS_KEY="test",
        AWS_DEFAULT_REGION="us-east-1",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="1",
        JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION="1",
        PYTHON=python(),
    )
    if endpoint:
        env.update(AWS_ENDPOINT_URL=endpoint, AWS_ENDPOINT_URL_S3=endpoint)
    return env


def _context_of(source: Path) -> dict[str, Any]:
    """The CDK context the release's own scripts/deploy_local.sh synthesizes with (else this one's)."""
    script = source / "scripts" / "deploy_local.sh"
    match = _CONTEXT.search(script.read_text()) if script.exists() else None
    return dict(json.loads(match[1])) if match else dict(DEFAULT_CONTEXT)


def checkout(ref: str, work: Path, progress: Progress) -> tuple[str, Path]:
    """(commit, source tree) of ``ref``: a detached worktree under ``work``, made once and reused."""
    commit = git(
        "rev-parse", "--verify", f"{resolve_ref(ref, ROOT)}^{{commit}}"
    )  # v0.1.0 without its tag too
    source = work / commit[:12] / "src"
    if (source / ".git").exists() and git("rev-parse", "HEAD", cwd=source) == commit:
        return commit, source
    progress(f"checking out {ref} ({commit[:7]}) into {source}")
    if source.exists():
        git("worktree", "remove", "--force", str(source))
    git("worktree", "prune")
    source.parent.mkdir(parents=True, exist_ok=True)
    git("worktree", "add", "--detach", str(source), commit)
    return commit, source


def build(
    source: Path, out: Path, progress: Progress, label: str, context: dict[str, Any] | None = None
) -> Path:
    """The release's local Lambda asset (its own Makefile target) and its template (its own app.py),
    synthesized into ``out`` (with ``context`` added to the CDK context it deploys with); the assembly's
    directory."""
    venv = Path(python()).parent.parent
    out.mkdir(parents=True, exist_ok=True)
    progress(f"building {label}'s Lambda asset (make lambda-assets-local)")
    # The release's own Makefile, pointed at this virtualenv (VENV) which is taken as installed (-o): the
    # release's pyproject.toml must not reinstall it.
    _run(
        [
            "make",
            "--no-print-directory",
            f"VENV={venv}",
            "-o",
            f"{venv}/bin/.installed",
            "lambda-assets-local",
        ],
        source,
        out / "asset.log",
        _clean_env(),
    )
    assembly = out / "cdk.out"
    shutil.rmtree(assembly, ignore_errors=True)
    assembly.mkdir(parents=True)
    progress(f"synthesizing {label}'s template (infra/cdk/app.py)")
    env = _clean_env()
    env.update(
        CDK_OUTDIR=str(assembly), CDK_CONTEXT_JSON=json.dumps({**_context_of(source), **(context or {})})
    )
    _run([python(), "app.py"], source / "infra" / "cdk", out / "synth.log", env)
    (out / ".built").write_text(f"{label}\n")  # asset and template complete: reused next time
    return assembly


def older_release(ref: str, work: Path, progress: Progress) -> Release:
    commit, source = checkout(ref, work, progress)
    out = work / commit[:12]
    assembly = out / "cdk.out"
    if not (out / ".built").exists():
        assembly = build(source, out, progress, f"{ref} ({commit[:7]})")
    else:
        progress(f"{ref} ({commit[:7]}): built before, reused ({assembly})")
    return Release(ref, commit, f"{ref} ({commit[:7]})", source, assembly)


def current_release(
    work: Path, progress: Progress, context: dict[str, Any] | None = None, folder: str = "current"
) -> Release:
    """This checkout, built as it is (into ``work/folder``, with ``context`` added to its CDK context)."""
    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    label = f"current ({commit[:7]}{'-dirty' if dirty else ''})"
    assembly = build(ROOT, work / folder, progress, label, context)
    return Release("current", commit, label, ROOT, assembly)


def _cdk_dir() -> Path:
    """Where the CDK's tooling (aws-cdk, aws-cdk-local) is installed: this checkout's infra/cdk."""
    cdk = ROOT / "infra" / "cdk"
    if not (cdk / "node_modules" / ".bin" / "cdklocal").exists():
        subprocess.run(
            ["npm", "install", "--no-save", "--no-audit", "--no-fund", "--silent"], cwd=cdk, check=True
        )
    return cdk


def bootstrap(release: Release, endpoint: str, logs: Path) -> None:
    _run(
        ["npx", "cdklocal", "bootstrap", "--app", str(release.assembly)],
        _cdk_dir(),
        logs / "bootstrap.log",
        _clean_env(endpoint),
    )


def deploy(release: Release, endpoint: str, log: Path, stack_status: Callable[[], str]) -> Deploy:
    """``cdklocal deploy`` of the release's assembly onto the stack (an update in place when it exists)."""
    outputs = log.with_suffix(".outputs.json")
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(
            [
                "npx",
                "cdklocal",
                "deploy",
                "--app",
                str(release.assembly),
                "--require-approval",
                "never",
                "--outputs-file",
                str(outputs),
            ],
            cwd=_cdk_dir(),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_clean_env(endpoint),
            check=False,
        )
    seconds = time.monotonic() - started
    text = log.read_text(errors="replace")
    failed = sorted({f"{m[2]} {m[3].strip()}"[:400] for m in map(_FAILED.search, text.splitlines()) if m})
    return Deploy(release.label, done.returncode == 0, seconds, stack_status(), failed, str(log))


def destroy(release: Release, endpoint: str, log: Path) -> None:
    _run(
        ["npx", "cdklocal", "destroy", "--app", str(release.assembly), "--force"],
        _cdk_dir(),
        log,
        _clean_env(endpoint),
    )


def team(release: Release, outputs: Path, endpoint: str, name: str) -> dict[str, Any]:
    """A team created by the release's own code (``duetime deployed-local ready --json``): its token."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from duetime.cli import main; "
        "raise SystemExit(main(sys.argv[2:]))"
    )
    done = subprocess.run(
        [
            python(),
            "-c",
            code,
            str(release.source / "shared"),
            "deployed-local",
            "ready",
            "--outputs",
            str(outputs),
            "--endpoint",
            endpoint,
            "--team",
            name,
            "--json",
        ],
        capture_output=True,
        text=True,
        env=_clean_env(),
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"creating the team with {release.label}'s code failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))
