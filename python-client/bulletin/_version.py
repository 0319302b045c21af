# The package's one version: pyproject.toml reads it ([tool.setuptools.dynamic]), the client
# sends it in Hello, and `bulletin.__version__` is this.
__version__ = "0.1.0"
