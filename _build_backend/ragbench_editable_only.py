"""The build backend (pyproject.toml's `[build-system]`): setuptools', with the wheel refused.

cli/, steps/, pipelines/ and materializers/ are top-level packages (the design's layout), and ZenML records a
step by its module path (`steps.chunk...`): a wheel would put modules named `cli` and `steps` at the top of
site-packages, where another distribution's modules of the same name would collide with them, and moving them
under `ragbench` would change every step's source path and cache key. So only `pip install -e .` from a clone
is built (a `.pth` file puts the clone's root on the import path; site-packages holds no module of ours), and
a wheel stops here with what to run instead. docs/getting-started/install.md says the same to users.
"""

from setuptools.build_meta import *  # noqa: F403 (the editable and sdist hooks, as setuptools defines them)

REFUSAL = (
    "ragbench installs only as an editable install from a clone: `pip install -e <clone>`. A wheel would put "
    "its top-level packages cli/, steps/, pipelines/ and materializers/ at the top of site-packages "
    "(docs/getting-started/install.md)."
)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Refused: see the module docstring."""
    raise SystemExit(REFUSAL)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """Refused before anything is built, so `pip install .` stops at its first step."""
    raise SystemExit(REFUSAL)
