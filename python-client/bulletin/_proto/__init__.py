"""The generated gRPC stubs of protocol/src/main/proto/bulletin.proto.

The stubs are build outputs (gitignored). In a source checkout they are regenerated here on
first import whenever they are missing or older than the .proto, so editing the proto never
leaves Python on stale stubs; an installed package ships them pre-generated.
"""

from ._generate import find_proto, generate, is_stale

_proto = find_proto()
if _proto is not None and is_stale(_proto):
    try:
        generate(_proto)
    except ImportError:
        pass  # no grpc_tools: fall through and use whatever stubs exist

try:
    from . import bulletin_pb2, bulletin_pb2_grpc
except ModuleNotFoundError as exc:
    if exc.name not in (f"{__name__}.bulletin_pb2", f"{__name__}.bulletin_pb2_grpc"):
        raise
    raise ImportError(
        "bulletin's gRPC stubs are missing. In a source checkout run `make build` or "
        "`python python-client/tools/gen_proto.py` (needs grpcio-tools)."
    ) from exc

__all__ = ["bulletin_pb2", "bulletin_pb2_grpc"]
