"""Arrow IPC stream framing for the kinds whose body layout bulletin chooses itself.

pyarrow's writer places body buffers on 8-byte boundaries and gives no way to ask for more, and it
would need the payload bytes to compute nothing more than offsets. For tensors and pickles the
layout is simple (one record batch of a few flat buffers), so the RecordBatch message metadata is
written here directly: every body buffer starts on a 64-byte boundary *of the stream* (the body
itself starts on one), which is what Arrow recommends and what AVX-512 loads and page-aligned
mappings like. The schema message still comes from pyarrow (``Schema.serialize()`` is byte for
byte the first message pyarrow's own stream writer emits), and every stream built here is read
back by pyarrow's reader, whose flatbuffer verifier checks this metadata, in the tests.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Sequence

ALIGNMENT = 64
# A tensor this large starts on a page of the stream: a store file's array is then page-aligned
# in every mapping of it, and an executor can lend a region a page into a spare file to the
# function for its result, and write the header in front of it afterwards (bulletin/_native).
PAGE = 4096
PAGE_ALIGNED_BODY = 1 << 20
CONTINUATION = b"\xff\xff\xff\xff"
EOS = CONTINUATION + b"\x00\x00\x00\x00"  # end-of-stream marker: continuation, length 0

_METADATA_V5 = 4        # org.apache.arrow.flatbuf.MetadataVersion.V5
_HEADER_RECORD_BATCH = 3  # org.apache.arrow.flatbuf.MessageHeader.RecordBatch


def pad_to(n: int, alignment: int = ALIGNMENT) -> int:
    return -n % alignment


class FieldNode(NamedTuple):
    length: int
    null_count: int = 0


class BufferSpec(NamedTuple):
    offset: int  # from the start of the message body
    length: int


def _record_batch_flatbuffer(length: int, nodes: Sequence[FieldNode],
                             buffers: Sequence[BufferSpec], body_length: int) -> bytearray:
    """The flatbuffer of ``Message{version: V5, header: RecordBatch{...}, bodyLength}``.

    Laid out front to back by hand (every uoffset points forward, every scalar is aligned to
    its size, vector elements of the 16-byte structs to 8):

        0   uint32 root -> Message table at 24
        4   Message vtable: size 12, table size 20, version@16 header_type@18 header@4 bodyLength@8
        24  Message table: soffset 20, header -> 56, bodyLength, version, header_type
        44  RecordBatch vtable: size 10, table size 20, length@8 nodes@4 buffers@16
        56  RecordBatch table: soffset 12, nodes -> 76, length, buffers -> Q
        76  nodes vector (count, then FieldNode{length, null_count} from 80)
        Q   buffers vector (count, then Buffer{offset, length} at Q + 4, 8-aligned)
    """
    n_nodes, n_buffers = len(nodes), len(buffers)
    nodes_at = 76
    buffers_at = nodes_at + 4 + 16 * n_nodes
    buffers_at += (-(buffers_at + 4)) % 8
    out = bytearray(buffers_at + 4 + 16 * n_buffers)
    struct.pack_into("<I", out, 0, 24)
    struct.pack_into("<6H", out, 4, 12, 20, 16, 18, 4, 8)
    struct.pack_into("<iIqhB", out, 24, 24 - 4, 56 - 28, body_length, _METADATA_V5,
                     _HEADER_RECORD_BATCH)
    struct.pack_into("<5H", out, 44, 10, 20, 8, 4, 16)
    struct.pack_into("<iIqI", out, 56, 56 - 44, nodes_at - 60, length, buffers_at - 72)
    struct.pack_into("<I", out, nodes_at, n_nodes)
    for i, node in enumerate(nodes):
        struct.pack_into("<qq", out, nodes_at + 4 + 16 * i, node.length, node.null_count)
    struct.pack_into("<I", out, buffers_at, n_buffers)
    for i, buf in enumerate(buffers):
        struct.pack_into("<qq", out, buffers_at + 4 + 16 * i, buf.offset, buf.length)
    return out


def record_batch_header(stream_offset: int, length: int, nodes: Sequence[FieldNode],
                        buffers: Sequence[BufferSpec], body_length: int,
                        body_alignment: int = ALIGNMENT) -> bytes:
    """The encapsulated RecordBatch message up to its body: continuation, metadata length, the
    flatbuffer, then zero padding so that the body starts on a ``body_alignment`` boundary of
    the stream (the metadata length counts the padding, as the format allows).
    ``stream_offset`` is where this message starts; it must be a multiple of 8."""
    if stream_offset % 8:
        raise ValueError(f"an IPC message must start on an 8-byte boundary, not at {stream_offset}")
    flatbuffer = _record_batch_flatbuffer(length, nodes, buffers, body_length)
    used = stream_offset + 8 + len(flatbuffer)
    flatbuffer += bytes(pad_to(used, body_alignment))
    return CONTINUATION + struct.pack("<i", len(flatbuffer)) + bytes(flatbuffer)


class BodyLayout:
    """Places buffers in a message body, each on a 64-byte boundary; collects the Arrow
    buffer list and the pieces (bytes or payload references) to emit in order."""

    def __init__(self) -> None:
        self.buffers: list[BufferSpec] = []
        self.pieces: list = []  # ("pad", n) or ("data", obj, nbytes)
        self.size = 0

    def empty(self) -> None:
        """An absent buffer (a validity bitmap when nothing is null)."""
        self.buffers.append(BufferSpec(0, 0))

    def add(self, data, nbytes: int) -> None:
        gap = pad_to(self.size)
        if gap and nbytes:
            self.pieces.append(("pad", gap))
            self.size += gap
        if not nbytes:
            self.buffers.append(BufferSpec(0, 0))
            return
        self.buffers.append(BufferSpec(self.size, nbytes))
        self.pieces.append(("data", data, nbytes))
        self.size += nbytes

    def finish(self) -> int:
        """Pads the body to a multiple of 8 (what the IPC format requires); returns its length."""
        gap = pad_to(self.size, 8)
        if gap:
            self.pieces.append(("pad", gap))
            self.size += gap
        return self.size
