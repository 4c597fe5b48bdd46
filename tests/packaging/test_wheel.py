"""The wheel works on its own: built from the repository's files, installed into a fresh venv.

The fresh venv sees the development venv's third-party packages through a ``.pth`` line (installing
jax and torch from a registry inside a test would take minutes), but not the editable ``scalefit``:
the editable finder is only activated by a ``.pth`` file inside a *site* directory, and a plain path
line does not process the ``.pth`` files of the folder it adds. The test proves that ``scalefit`` is
imported from the fresh venv's site-packages and then runs the demo from an empty folder.

It also checks that the dependency floors declared in pyproject.toml are the versions the
minimum-versions CI leg installs (``.ci/min-versions.txt``), so the two cannot drift apart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "scalefit", "data")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SCALEFIT_"))}
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory) -> tuple[Path, Path]:
    """Build the wheel from a copy of the sources and install it into a fresh venv (once)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, src / name)
    dist = root / "dist"
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(src)],
        check=True,
        capture_output=True,
        env=_clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1"),
    )
    (wheel,) = dist.glob("scalefit-*.whl")
    fresh = root / "venv"
    venv.EnvBuilder(with_pip=False).create(fresh)
    fresh_python = fresh / "bin" / "python"
    subprocess.run(
        [*pip, "--python", str(fresh_python), "install", "--no-deps", "--no-index", "-q", wheel],
        check=True,
        capture_output=True,
        env=_clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1"),
    )
    fresh_site = Path(
        subprocess.run(
            [fresh_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    dev_site = sysconfig.get_paths()["purelib"]
    (fresh_site / "zz_dev_dependencies.pth").write_text(dev_site + "\n")
    return wheel, fresh


def test_wheel_contains_the_bundled_tables(wheel_venv):
    wheel, _ = wheel_venv
    names = set(zipfile.ZipFile(wheel).namelist())
    for table in sorted((REPO / "data").glob("*.csv")):
        assert f"scalefit/_bundled/{table.name}" in names
    # Gemstones' main table travels with its MIT licence
    for name in ("wandb_df_for_fitting_hot_100b+.jsonl", "LICENSE"):
        assert f"scalefit/_bundled/gemstones/{name}" in names
    assert not any(n.startswith(("data/", "tests/")) for n in names)


def test_fresh_venv_imports_the_wheel_and_loads_every_bundled_table(wheel_venv, tmp_path):
    _, fresh = wheel_venv
    code = (
        "import scalefit, scalefit.datasets as d; print(scalefit.__file__); "
        "print(d.BUNDLED_DIR); "
        "[print(n, len(d.load(n))) for n, ds in sorted(d.DATASETS.items()) if ds.bundled]"
    )
    out = subprocess.run(
        [fresh / "bin" / "python", "-c", code],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
        env=_clean_env(),
    ).stdout.splitlines()
    module_file, bundled_dir, *rows = out
    assert Path(module_file).is_relative_to(fresh), module_file
    assert not Path(module_file).is_relative_to(REPO)
    assert Path(bundled_dir) == Path(module_file).parent / "_bundled"
    assert dict(r.split() for r in rows) == {
        "depth_delusion": "30",
        "gemstones": "770",
        "lm_grid_shakespeare": "48",
    }


def test_demo_runs_from_the_wheel_in_an_empty_folder(wheel_venv, tmp_path):
    _, fresh = wheel_venv
    empty_data = tmp_path / "no-data"
    empty_data.mkdir()
    proc = subprocess.run(
        [fresh / "bin" / "scalefit", "demo", "--bootstrap", "8", "--no-download"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_clean_env(SCALEFIT_CACHE_DIR=str(tmp_path / "cache"), MPLBACKEND="Agg"),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert proc.stdout.startswith("data     gemstones: bundled Gemstones grid")
    assert "the Chinchilla table was not found" in proc.stdout
    assert "== what to train" in proc.stdout and "In plain words: with 1e20 FLOP" in proc.stdout
    rec = pd.read_csv(tmp_path / "results" / "demo" / "recommendation.csv")
    assert rec["recommended"].iloc[0] and rec["depth"].notna().iloc[0]
    written = sorted(p.name for p in (tmp_path / "results" / "demo").iterdir())
    assert "allocation.csv" in written and "fit.json" in written
    assert any(name.endswith(".png") for name in written)


def _declared_floors() -> dict[str, str]:
    """The ``>=`` floor of each runtime dependency and of the ``bayes`` extra, from pyproject."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    floors = {}
    for line in [*project["dependencies"], *project["optional-dependencies"]["bayes"]]:
        req = Requirement(line)
        lower = [s.version for s in req.specifier if s.operator == ">="]
        assert len(lower) == 1, f"{line!r}: expected exactly one '>=' floor"
        floors[canonicalize_name(req.name)] = lower[0]
    return floors


def _pinned_versions() -> dict[str, str]:
    """The ``==`` pins of ``.ci/min-versions.txt`` (what the minimum-versions CI leg installs)."""
    pins = {}
    for raw in (REPO / ".ci" / "min-versions.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", f"{line!r}: expected an '==' pin"
        pins[canonicalize_name(req.name)] = spec.version
    return pins


def test_min_versions_constraints_pin_exactly_the_declared_floors():
    assert _pinned_versions() == _declared_floors()
