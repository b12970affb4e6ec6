"""The Lambda code asset (scripts/build_lambda.sh; `make check` builds both before the tests) carries no AWS
SDK of its own: the python3.13 runtime ships it, and a copy in the asset would shadow the runtime's. It does
carry urllib3, which duetime calls untrusted targets with: one with the decompression-bomb fixes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ..lambda_support import load_script

ROOT = Path(__file__).resolve().parents[2]
ASSETS = {"deployed (arm64)": ROOT / "build" / "lambda", "local": ROOT / "build" / "lambda-local"}
# What Lambda's Python runtimes ship, the SDK for Python and its dependencies, as modules; and those the
# asset leaves to the runtime (distribution names and modules): all but urllib3.
RUNTIME_MODULES = ("boto3", "botocore", "s3transfer", "jmespath", "urllib3", "dateutil", "six")
LEFT_TO_RUNTIME = {"boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six"}
LEFT_TO_RUNTIME_MODULES = [module for module in RUNTIME_MODULES if module != "urllib3"]
URLLIB3_FLOOR = (2, 6, 3)  # CVE-2025-66471, CVE-2025-66418 (2.6.0), CVE-2026-21441 (2.6.3)
# Every module of functions/: each function's handler, and the pollers' helper.
HANDLERS = tuple(
    f"{fn.parent.name}.{fn.stem}"
    for fn in sorted((ROOT / "functions").glob("*/*.py"))
    if fn.stem != "__init__"
)


def built(asset: Path) -> Path:
    if not (asset / ".built").is_file():
        pytest.fail(f"{asset} is not built: `make check` builds it (make lambda-assets lambda-assets-local)")
    return asset


def distributions_in(asset: Path) -> dict[str, tuple[int, ...]]:
    """The distributions installed in the asset, by normalized name, with their release numbers."""
    found = {}
    for dist_info in asset.glob("*.dist-info"):
        name, version = dist_info.name.removesuffix(".dist-info").rsplit("-", 1)
        release = tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])
        found[re.sub(r"[-_.]+", "-", name).lower()] = release
    return found


@pytest.mark.parametrize("asset", ASSETS.values(), ids=ASSETS.keys())
def test_the_lambda_asset_carries_no_aws_sdk_of_its_own(asset: Path) -> None:
    installed = distributions_in(built(asset))
    assert not set(installed) & LEFT_TO_RUNTIME
    shadowing = [m for m in LEFT_TO_RUNTIME_MODULES if (asset / m).exists() or (asset / f"{m}.py").exists()]
    assert shadowing == []
    assert {"pydantic", "aws-lambda-powertools", "aws-xray-sdk", "croniter"} <= set(installed)
    assert not (asset / "bin").exists()  # console scripts that would point at the build machine's Python


@pytest.mark.parametrize("asset", ASSETS.values(), ids=ASSETS.keys())
def test_the_lambda_asset_carries_a_urllib3_with_the_decompression_bomb_fixes(asset: Path) -> None:
    assert distributions_in(built(asset))["urllib3"] >= URLLIB3_FLOOR


def test_urllib3_has_one_floor_the_packages_and_the_assets() -> None:
    """pyproject.toml's floor is the fixed release, and the asset's build takes it from there (a second
    floor in the build script once let the package ask for any 2.x)."""
    requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = [r for r in requirements if re.match(r"urllib3\b", r)]
    assert floors == ["urllib3>=" + ".".join(map(str, URLLIB3_FLOOR))]
    assert not re.search(r"urllib3\s*[<>=!~]", (ROOT / "scripts" / "build_lambda.sh").read_text())


def python_313() -> str:
    """A Python 3.13 (the Lambda runtime's version) for this machine, as scripts/emulators.sh finds one."""
    candidates = [shutil.which("python3.13")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        env = {**os.environ, "PYENV_VERSION": "3.13.0"}
        which = subprocess.run([pyenv, "which", "python3.13"], capture_output=True, text=True, env=env)
        candidates.append(which.stdout.strip() if which.returncode == 0 else None)
    for candidate in filter(None, candidates):
        version = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
        )
        if version.returncode == 0 and version.stdout.strip() == "(3, 13)":
            return candidate
    pytest.skip("no Python 3.13 on this machine")


def runtime_sdk(directory: Path) -> Path:
    """A directory holding only the SDK and its dependencies, as the runtime ships them (pure Python: this
    process's copies serve any 3.x)."""
    directory.mkdir()
    for module in RUNTIME_MODULES:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, module
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        (directory / source.name).symlink_to(source)
    return directory


def test_the_handlers_import_from_the_asset_with_the_runtimes_sdk(tmp_path: Path) -> None:
    # The asset built for this machine, on a Python 3.13 without site-packages: first the asset (as Lambda
    # puts /var/task first), then the runtime's SDK. Every handler imports, the SDK is the runtime's, and the
    # runtime's botocore makes its clients with the asset's urllib3.
    asset = built(ASSETS["local"])
    sdk = runtime_sdk(tmp_path / "runtime")
    script = "\n".join(
        [
            "import importlib, sys",
            f"sys.path[:0] = [{str(asset)!r}, {str(sdk)!r}]",
            *(f"importlib.import_module('functions.{name}')" for name in HANDLERS),
            "import boto3, botocore, dateutil, urllib3",
            "boto3.client('sqs', region_name='us-east-1', aws_access_key_id='a', aws_secret_access_key='b')",
            "print('\\n'.join(m.__file__ for m in (boto3, botocore, dateutil, urllib3)))",
        ]
    )
    result = subprocess.run(
        [python_313(), "-I", "-S", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    # Each handler's cold-start line (powertools' JSON on stdout) names the commit the asset was built from.
    logged = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    commit = (asset / "duetime" / "COMMIT").read_text(encoding="utf-8").strip()
    assert [(line["message"], line["commit"]) for line in logged] == [("cold start", commit)] * len(HANDLERS)
    *sdk_modules, urllib3 = [line for line in result.stdout.splitlines() if not line.startswith("{")]
    assert all(path.startswith(str(sdk)) for path in sdk_modules)
    assert urllib3.startswith(str(asset))


@pytest.mark.parametrize("asset", ASSETS.values(), ids=ASSETS.keys())
def test_the_lambda_asset_holds_no_benchmark_code(asset: Path) -> None:
    """The benchmarks (duetime_bench, 5,000 lines and their data) are tools of this repository; the functions
    never import them (the test above imports every handler from the asset without them)."""
    package = built(asset) / "duetime"
    assert (package / "execution" / "worker.py").is_file()
    assert not (built(asset) / "duetime_bench").exists() and not (package / "bench").exists()
    assert len(HANDLERS) >= 6 and "poller.helper" in HANDLERS and "prescaler.handler" in HANDLERS


def test_the_cdk_app_imports_no_benchmark_code_by_any_chain() -> None:
    """The CDK app sizes the stack from the capacity model (``duetime.capacity``), never from the benchmarks:
    importing every module of the app loads no module of ``duetime_bench``."""
    app = ROOT / "infra" / "cdk"
    modules = [f"duetime_cdk.{p.stem}" for p in sorted((app / "duetime_cdk").glob("*.py"))]
    probe = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'duetime_bench'))\n"
        "print('duetime.capacity.plan' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(app), str(ROOT / "shared")])}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=app, env=env, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == "[]", out[0]
    assert out[1] == "True"  # the probe did load the app's capacity model


@pytest.mark.parametrize("asset", ASSETS.values(), ids=ASSETS.keys())
def test_the_lambda_asset_carries_the_commit_it_was_built_from(asset: Path) -> None:
    """scripts/build_lambda.sh writes the commit into the asset (duetime/COMMIT), which has no .git: duetime's
    build_info, imported from the asset with no git to ask, answers it (issue 49, item 3)."""
    written = (built(asset) / "duetime" / "COMMIT").read_text(encoding="utf-8").strip()
    assert re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", written)
    probe = "import sys; sys.path.insert(0, sys.argv[1]); import duetime.build_info as b; print(b.commit())"
    answer = subprocess.run(
        [sys.executable, "-c", probe, str(asset)],
        capture_output=True,
        text=True,
        check=True,
        cwd=asset,
        env={"PATH": "", "PYTHONSAFEPATH": "1"},
    )
    assert answer.stdout.strip() == written
    assert not (ROOT / "shared" / "duetime" / "COMMIT").exists()  # only the asset has one


@pytest.mark.parametrize("asset", ASSETS.values(), ids=ASSETS.keys())
def test_the_lambda_asset_holds_the_package_files_the_handlers_import_and_no_other(asset: Path) -> None:
    """``scripts/lambda_modules.py`` chooses them (``tests/unit/test_lambda_modules.py``); the build copies
    those, and only those (the commit it stamps aside)."""
    expected = {str(path) for path in load_script("lambda_modules").asset_files()}
    package = built(asset) / "duetime"
    files = {
        str(path.relative_to(asset))
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.name != "COMMIT"
    }
    assert files == expected, sorted(files ^ expected)[:10]
    assert not (package / "adapters" / "memory").exists() and not (package / "cli").exists()
