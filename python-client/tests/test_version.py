import importlib.metadata

import bulletin


def test_the_installed_version_is_the_one_in_version_py():
    # pyproject.toml declares the version dynamic, read from bulletin/_version.py: one source.
    assert importlib.metadata.version("bulletin") == bulletin.__version__


def test_the_python_version_is_the_poms():
    # The JVM side reads its version from the POM (protocol's BulletinVersion); the two
    # sources are tied here, where both are in reach (a source checkout).
    import pathlib
    import re

    pom = pathlib.Path(__file__).resolve().parents[2] / "pom.xml"
    version = re.search(r"<artifactId>bulletin-parent</artifactId>\s*<version>([^<]+)</version>",
                        pom.read_text()).group(1)
    assert version.removesuffix("-SNAPSHOT") == bulletin.__version__
