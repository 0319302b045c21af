import importlib.metadata

import bulletin


def test_the_installed_version_is_the_one_in_version_py():
    # pyproject.toml declares the version dynamic, read from bulletin/_version.py: one source.
    assert importlib.metadata.version("bulletin") == bulletin.__version__
