"""Worker certificates from the command line (docs/security.md, "A certificate per worker"):
the owner's `bulletin worker join-token ID` and `bulletin worker revoke ID`, and the join token
`bulletin worker` hands its agent. The token goes to the agent in its environment
(BULLETIN_JOIN_TOKEN), which only its own user can read, never in its argv, which `ps` shows."""

from __future__ import annotations

import os
from pathlib import Path

import grpc

from ._errors import BulletinError


def issue(worker_id: str, ttl_seconds: float = 0.0, address: str | None = None,
          ca=None) -> tuple[str, float]:
    """A single-use join token for worker_id (the owner's token; 0: the runtime's default
    lifetime): (token, expires_at epoch seconds)."""
    from ._connection import Connection
    from ._proto import bulletin_pb2 as pb

    if not worker_id or any(c.isspace() for c in worker_id):
        raise BulletinError(f"a worker id is needed, without spaces: got {worker_id!r}")
    conn = Connection(address, connect_timeout=3.0, ca=ca)
    try:
        reply = conn.call(conn.stub.IssueJoinToken, pb.IssueJoinTokenRequest(
            worker_id=worker_id, ttl_seconds=ttl_seconds), "IssueJoinToken")
    finally:
        conn.close()
    return reply.token, reply.expires_at


def revoke(worker_id: str) -> bool:
    """Revokes worker_id; whether it was attached (its link is now closed)."""
    from ._connection import Connection
    from ._proto import bulletin_pb2 as pb

    conn = Connection(connect_timeout=3.0)
    try:
        reply = conn.call(conn.stub.RevokeWorker, pb.RevokeWorkerRequest(worker_id=worker_id),
                          "RevokeWorker")
    finally:
        conn.close()
    return reply.was_attached


def given_token(join: str | None, join_file: Path | None) -> str | None:
    """The join token given to `bulletin worker`: --join-file, --join, else
    $BULLETIN_JOIN_TOKEN; None when none."""
    if join_file is not None:
        try:
            token = join_file.read_text().strip()
        except OSError as exc:
            raise BulletinError(f"cannot read --join-file {join_file}: {exc.strerror}") from None
        if not token:
            raise BulletinError(f"--join-file {join_file} is empty")
        return token
    if join:
        return join.strip()
    return os.environ.get("BULLETIN_JOIN_TOKEN", "").strip() or None


def token_as_owner(head: str, worker_id: str, ca) -> str | None:
    """On a machine that holds the owner's token (the head's, or a copy), a join token for
    worker_id from the runtime at head, so the owner starting a worker by hand needs no extra
    step. None where the runtime has no worker certificates (it answers UNIMPLEMENTED) or this
    user is not its owner: the worker then attaches with the worker token, as before."""
    from ._connection import Connection
    from ._proto import bulletin_pb2 as pb

    try:
        conn = Connection(head, connect_timeout=3.0, ca=ca)
    except BulletinError:
        return None  # no owner's token here, or no runtime: the worker says what is wrong
    try:
        return conn.stub.IssueJoinToken(pb.IssueJoinTokenRequest(worker_id=worker_id),
                                        metadata=conn.metadata, timeout=10.0).token
    except grpc.RpcError:
        return None
    finally:
        conn.close()
