"""The Lambda asset carries the part of the duetime package its handlers import
(``scripts/lambda_modules.py``) and nothing more, and that part is whole: every handler and every module of
it imports from the copy alone. The built assets hold exactly these files
(``tests/infra/test_lambda_asset.py``), and the deployed stack's tests run them on LocalStack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..lambda_support import load_script

ROOT = Path(__file__).resolve().parents[2]


lambda_modules = load_script("lambda_modules")


@pytest.fixture(scope="module")
def asset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("asset")
    lambda_modules.copy_asset_files(target)
    return target


def _modules_in(asset: Path) -> list[str]:
    return sorted(
        ".".join(path.relative_to(asset).with_suffix("").parts).removesuffix(".__init__")
        for path in (asset / "duetime").rglob("*.py")
    )


def test_the_asset_leaves_out_what_no_handler_imports(asset: Path) -> None:
    carried = set(_modules_in(asset))
    every = {
        ".".join(path.relative_to(ROOT / "shared").with_suffix("").parts).removesuffix(".__init__")
        for path in (ROOT / "shared" / "duetime").rglob("*.py")
    }
    left_out = every - carried
    # What the issue named: the twin, the CLI, the capacity model, duetime local's processes.
    for name in ("adapters.memory", "cli", "capacity", "local.system", "local.gateway", "client"):
        assert f"duetime.{name}" in left_out
    assert not any(module.startswith("duetime.adapters.memory") for module in carried)
    assert not (asset / "duetime" / "capacity" / "calibration.json").exists()
    # What the handlers need: the store, the queue, the worker's and the poller's logic, the console's pages.
    for name in ("wiring", "adapters.dynamodb.store", "execution.worker", "scheduling.poller", "api.app"):
        assert f"duetime.{name}" in carried
    assert (asset / "duetime" / "api" / "console" / "console.js").exists()


IMPORT_ALL = """
import importlib, importlib.util, json, sys
asset = sys.argv[1]
sys.path.insert(0, asset)
for name in json.loads(sys.argv[2]):
    importlib.import_module(name)
for handler in json.loads(sys.argv[3]):
    spec = importlib.util.spec_from_file_location("handler_" + str(abs(hash(handler))), handler)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
outside = sorted(
    name for name, module in sys.modules.items()
    if name.split(".")[0] == "duetime" and not (getattr(module, "__file__", "") or "").startswith(asset)
)
print(json.dumps(outside))
"""


def test_every_handler_and_every_module_of_the_asset_imports_from_it_alone(asset: Path) -> None:
    handlers = [str(path) for path in lambda_modules.handler_files()]
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, str(asset), json.dumps(_modules_in(asset)), json.dumps(handlers)],
        capture_output=True,
        text=True,
        cwd=asset,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []  # no duetime module came from outside the copy
