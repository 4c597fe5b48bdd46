"""Packaging glue that pyproject.toml cannot express on its own.

The bundled loss tables live in the top-level ``data/`` folder (their source of truth, with a
README per table). The wheel ships them as the package ``scalefit._bundled`` by mapping that
package onto ``data/``; ``scalefit.datasets`` looks there first and falls back to ``data/`` in a
source checkout (editable installs). Everything else is declared in pyproject.toml.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["scalefit", "scalefit.*"]), "scalefit._bundled"],
    package_dir={"scalefit._bundled": "data"},
    package_data={"scalefit._bundled": ["*.csv", "*.md", "gemstones/*.jsonl", "gemstones/LICENSE"]},
)
