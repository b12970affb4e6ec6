"""The part of the duetime package the Lambda asset carries: the modules its handlers can import, and the data
files of their packages. What only the CLI, ``duetime local``, the capacity model or the tests use (the
in-memory twin, for one) stays out of what every function loads and AWS stores.

Reachability is the standard library's ``modulefinder``: it reads each handler's bytecode and follows every
import statement, also those inside functions (the lazy ones), without running anything. An import by a
computed name would escape it; the package has none on the handlers' paths (``test_lambda_asset.py``
imports every handler from the pruned copy alone, and the deployed stack's tests run it on LocalStack).

    python scripts/lambda_modules.py              # the files, relative to shared/, one a line
    python scripts/lambda_modules.py --copy-to D  # copy them into D (D/duetime/...)
"""

from __future__ import annotations

import argparse
import modulefinder
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "duetime"


def handler_files(root: Path = ROOT) -> list[Path]:
    """Every function's handler modules (``functions/<name>/*.py``), as the asset carries them."""
    return sorted((root / "functions").glob("*/*.py"))


def reachable_modules(root: Path = ROOT) -> dict[str, Path]:
    """The duetime modules (name -> file) the handlers import, directly or through one another."""
    finder = modulefinder.ModuleFinder(path=[str(root / "shared"), *sys.path])
    for handler in handler_files(root):
        finder.run_script(str(handler))
    files = {name: getattr(module, "__file__", None) for name, module in finder.modules.items()}
    return {
        name: Path(file)
        for name, file in files.items()
        if (name == PACKAGE or name.startswith(PACKAGE + ".")) and file
    }


def asset_files(root: Path = ROOT) -> list[Path]:
    """The reachable modules, and each data file whose nearest package (the closest folder above it with an
    ``__init__.py``) holds one of them (the console's pages beside ``duetime.api``); relative to shared/."""
    shared = root / "shared"
    modules = {path.resolve() for path in reachable_modules(root).values()}
    packages = {path.parent for path in modules}
    data = []
    for path in (shared / PACKAGE).rglob("*"):
        if not path.is_file() or path.suffix in {".py", ".pyc"} or "__pycache__" in path.parts:
            continue
        package = next(parent for parent in path.parents if (parent / "__init__.py").exists())
        if package.resolve() in packages:
            data.append(path.resolve())
    return sorted(path.relative_to(shared.resolve()) for path in modules | set(data))


def copy_asset_files(target: Path, root: Path = ROOT) -> list[Path]:
    """Copy ``asset_files`` into ``target`` (``target/duetime/...``); the files copied."""
    files = asset_files(root)
    for relative in files:
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / "shared" / relative, destination)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copy-to", type=Path, help="copy the files into this folder")
    args = parser.parse_args()
    if args.copy_to is not None:
        files = copy_asset_files(args.copy_to)
        total = len(list((ROOT / "shared" / PACKAGE).rglob("*.py")))
        modules = sum(1 for f in files if f.suffix == ".py")
        data = len(files) - modules
        print(f"lambda_modules: {modules} of the package's {total} modules, {data} data files")
    else:
        print("\n".join(str(path) for path in asset_files()))


if __name__ == "__main__":
    main()
