"""Package discovery for the `moot` namespace (metadata and dependencies are in pyproject.toml).

Each root folder is one subpackage of `moot` (``core/`` is ``moot.core``, ...); setuptools finds
the packages below each, so a new room needs no entry anywhere.
"""

from setuptools import find_namespace_packages, setup

ROOTS = {
    "moot": "moot",
    "moot.core": "core",
    "moot.agents": "agents",
    "moot.graphs": "graphs",
    "moot.training": "training",
    "moot.prompts": "prompts",
}

setup(
    package_dir=ROOTS,
    packages=[
        f"{name}.{sub}" if sub else name
        for name, folder in ROOTS.items()
        for sub in ("", *find_namespace_packages(folder, exclude=["*__pycache__*"]))
    ],
)
