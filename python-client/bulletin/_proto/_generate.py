"""Generates the gRPC stubs of bulletin.proto into this folder.

Kept free of package imports so that tools/gen_proto.py can load it by path, before the
package is importable.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
GENERATED = ("bulletin_pb2.py", "bulletin_pb2_grpc.py", "bulletin_pb2.pyi")
# python-client/bulletin/_proto -> repository root
SOURCE_PROTO = HERE.parents[2] / "protocol" / "src" / "main" / "proto" / "bulletin.proto"


def find_proto() -> Path | None:
    override = os.environ.get("BULLETIN_PROTO")
    if override:
        return Path(override)
    return SOURCE_PROTO if SOURCE_PROTO.is_file() else None


def is_stale(proto: Path, out_dir: Path = HERE) -> bool:
    outputs = [out_dir / name for name in GENERATED]
    if not all(p.is_file() for p in outputs):
        return True
    newest_input = max(proto.stat().st_mtime, Path(__file__).stat().st_mtime)
    return min(p.stat().st_mtime for p in outputs) < newest_input


def generate(proto: Path, out_dir: Path = HERE) -> list[Path]:
    """Runs protoc from grpc_tools and moves the results into out_dir atomically.

    Several processes (executors starting together) may import the package at once, so the
    files are produced in a scratch folder and renamed into place whole.
    """
    from grpc_tools import protoc  # only a build-time dependency
    import importlib.resources

    proto = proto.resolve()
    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".gen-") as scratch:
        code = protoc.main([
            "grpc_tools.protoc",
            f"-I{proto.parent}",
            f"-I{well_known}",
            f"--python_out={scratch}",
            f"--pyi_out={scratch}",
            f"--grpc_python_out={scratch}",
            str(proto),
        ])
        if code != 0:
            raise RuntimeError(f"protoc failed with exit code {code} on {proto}")
        grpc_module = Path(scratch) / "bulletin_pb2_grpc.py"
        # protoc writes a top-level import; the stubs live inside bulletin._proto.
        grpc_module.write_text(re.sub(
            r"^import bulletin_pb2 as bulletin__pb2$",
            "from . import bulletin_pb2 as bulletin__pb2",
            grpc_module.read_text(), flags=re.MULTILINE))
        written = []
        for name in GENERATED:
            target = out_dir / name
            os.replace(Path(scratch) / name, target)
            written.append(target)
    return written
