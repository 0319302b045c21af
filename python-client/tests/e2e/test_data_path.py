"""The data path against real clusters: same-host store files, the gRPC path with its checks,
content addressing, Future arguments, scatter refs, capacity, owners and a killed uploader."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import bulletin
from bulletin import StoreFullError
from cluster_support import (CALL_SECONDS, assert_serves, referenced_objects, staged_files,
                             start_cluster, wait_until)

pytestmark = pytest.mark.timeout(120)


def double(x):
    return x * 2


def pick(x, i):
    return float(x[i])


def total(x):
    return float(np.asarray(x).sum())


def make(n):
    return np.arange(n, dtype=np.float32)


def test_large_array_round_trip_maps_the_result_from_the_store(client):
    assert client._transfer.same_host
    a = np.random.default_rng(1).random(1 << 20, dtype=np.float32)
    value = client.submit(double, a).result(timeout=CALL_SECONDS)
    np.testing.assert_array_equal(value, a * 2)
    # A view on the file, mapped copy-on-write: writable, as a downloaded result is.
    assert value.dtype == np.float32 and value.flags.writeable
    assert _in_store_mapping(client, value.__array_interface__["data"][0])


def _in_store_mapping(client, address: int) -> bool:
    """Whether ``address`` lies in this process's mapping of a file of the store."""
    folder = str(client._transfer.folder)
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].strip().startswith(folder):
                low, high = (int(x, 16) for x in fields[0].split("-"))
                if low <= address < high:
                    return True
    return False


def same(x):
    return x


def test_a_tensor_result_shares_the_mapped_file_and_its_writes_stay_here(client):
    """torch has no read-only tensors: from a read-only mapping each tensor of a result was
    copied. Mapped copy-on-write, it is a view on the store's file, and writing it changes
    neither the file nor what the cluster computes with the object."""
    torch = pytest.importorskip("torch")
    t = torch.arange(1 << 20, dtype=torch.float32)
    ref = client.scatter(t)
    value = client.submit(same, ref).result(timeout=CALL_SECONDS)  # the stored object itself
    assert torch.equal(value, t)
    assert _in_store_mapping(client, value.data_ptr()), "the tensor is a copy, not the mapping"
    value.fill_(-1.0)
    assert client.submit(total, ref).result(timeout=CALL_SECONDS) == float(t.sum())
    assert torch.equal(client.submit(same, ref).result(timeout=CALL_SECONDS), t)


def test_same_array_to_ten_calls_is_uploaded_once(client):
    data = make(1 << 20)
    uploads = client._transfer.uploads
    futures = [client.submit(pick, data, i) for i in range(10)]
    assert [f.result(timeout=CALL_SECONDS) for f in futures] == [float(i) for i in range(10)]
    assert client._transfer.uploads - uploads == 1
    # An equal array built again is found with "has it?": nothing is sent.
    sent = client._transfer.uploaded_bytes
    assert client.submit(pick, make(1 << 20), 3).result(timeout=CALL_SECONDS) == 3.0
    assert client._transfer.uploaded_bytes == sent


def test_scatter_uploads_once_and_refs_resolve_remotely(client):
    ref = client.scatter(make(1 << 18))
    uploads = client._transfer.uploads
    results = [client.submit(pick, ref, i).result(timeout=CALL_SECONDS) for i in (1, 2, 3)]
    assert results == [1.0, 2.0, 3.0] and client._transfer.uploads == uploads
    assert client.submit(lambda refs: len(refs), [ref, ref]).result(timeout=CALL_SECONDS) == 2


def test_future_argument_resolves_on_the_cluster_without_a_fetch(client):
    first = client.submit(make, 1 << 20)
    second = client.submit(total, first)  # submitted before first finishes
    assert second.result(timeout=CALL_SECONDS) == float(np.arange(1 << 20, dtype=np.float32).sum())
    assert first.remote_id is not None, "the first result never came to the client"
    assert first.result(timeout=CALL_SECONDS)[5] == 5.0  # and it can still be fetched
    assert first.remote_id is None


def test_failed_future_argument_fails_the_dependent_call_naming_it(client):
    def boom():
        raise ValueError("no")

    first = client.submit(boom)
    second = client.submit(total, first)
    # As in Dask, the dependent call raises its input's error; a note names the input.
    with pytest.raises(ValueError, match="no") as info:
        second.result(timeout=CALL_SECONDS)
    assert second.status == "error"
    if sys.version_info >= (3, 11):
        assert any(first.key in note and second.key in note for note in info.value.__notes__)
    assert_serves(client)


def test_unsupported_dtype_falls_back_to_pickle(client):
    odd = np.array([{"a": 1}, None, "text"] * 200_000, dtype=object)
    assert client.submit(len, odd).result(timeout=CALL_SECONDS) == 600_000
    assert_serves(client)


def test_grpc_path_with_a_corrupted_chunk_retries_and_succeeds(cluster, monkeypatch):
    monkeypatch.setenv("BULLETIN_DATA_PATH", "grpc")
    with cluster.client(set_as_default=False) as remote:
        assert not remote._transfer.same_host
        a = np.random.default_rng(2).random(3 << 20)  # 24 MiB: many chunks
        remote._transfer.corrupt_next_chunk = True
        value = remote.submit(double, a).result(timeout=CALL_SECONDS)
        np.testing.assert_array_equal(value, a * 2)
        assert not remote._transfer.corrupt_next_chunk  # the corruption was sent, then retried
        assert remote.submit(pick, a, 7).result(timeout=CALL_SECONDS) == a[7]


UPLOADER = textwrap.dedent("""
    import os, sys, numpy as np, bulletin
    client = bulletin.Client()
    data = np.random.default_rng(0).random(400 << 17)  # 400 MiB
    print("uploading", flush=True)
    client.submit(len, data).result()
""")


@pytest.mark.parametrize("path", ["grpc", "auto"])
def test_client_killed_mid_upload_leaves_nothing(cluster, client, path):
    env = dict(os.environ, BULLETIN_ADDRESS=cluster.address, BULLETIN_TOKEN=cluster.token,
               BULLETIN_DATA_PATH=path)
    proc = subprocess.Popen([sys.executable, "-c", UPLOADER], env=env, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "uploading"
        time.sleep(0.8)  # mid-way through encoding and writing the 400 MiB
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    # The leak check after this test also verifies no staged file and no held object remain.
    # (The killed client's session ends once the cluster's reconnect window has passed.)
    wait_until(lambda: not staged_files(cluster.store_dir), timeout=20,
               what="the killed client's partial object to go away")
    assert_serves(client)


def test_object_calls_of_an_ended_or_never_opened_session_hold_nothing(cluster, client,
                                                                      monkeypatch):
    import grpc
    from bulletin._proto import bulletin_pb2 as pb
    before = referenced_objects(client)
    # A client that closed (or was killed, and its window passed): a transfer it still had going
    # is refused, rather than held by a session nothing would ever end.
    gone = cluster.client(set_as_default=False)
    gone.close()

    def refusal():  # close() ends the session as the runtime hears the stream end: soon after
        try:
            client._conn.stub.HasObjects(pb.HasObjectsRequest(ids=["00" * 16]),
                                         metadata=gone._conn.metadata, timeout=CALL_SECONDS)
        except grpc.RpcError as error:
            return error
        return None
    refused = wait_until(refusal, timeout=10, what="the closed session to be ended")
    assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"session {gone._conn.session_id} has ended" in refused.details()
    assert "create a new bulletin.Client" in refused.details()
    # Uploads naming a session whose stream never opens are held until the reconnect window
    # has passed (2 s on the session cluster; 5 s at least), then released.
    monkeypatch.setenv("BULLETIN_DATA_PATH", "grpc")  # PutObject: no file staged by name
    with cluster.client(set_as_default=False) as other:
        other._conn.session_id = "never-opened-0123456789"
        other._conn.metadata = tuple(m for m in other._conn.metadata
                                     if m[0] != "bulletin-session") + (
            ("bulletin-session", other._conn.session_id),)
        held = other.scatter(np.random.default_rng(5).random(1 << 17))
        assert referenced_objects(client) == before + 1
        wait_until(lambda: referenced_objects(client) == before, timeout=20,
                   what="the never-opened session's hold to be released")
        del held
    assert_serves(client)

def test_small_store_refuses_too_large_objects_and_keeps_other_users_out(tmp_path):
    config = tmp_path / "cluster.yaml"
    config.write_text("users:\n  - name: ada\n    group: g\n    token: ada-token-0123456789\n"
                      "  - name: bob\n    group: g\n    token: bob-token-0123456789\n")
    cluster = start_cluster(tmp_path / "home", "--store-capacity", str(32 << 20),
                            "--config", str(config))
    try:
        ada = bulletin.Client(cluster.address, token="ada-token-0123456789",
                              set_as_default=False)
        bob = bulletin.Client(cluster.address, token="bob-token-0123456789",
                              set_as_default=False)
        with ada, bob:
            with pytest.raises(StoreFullError, match=r"\d+ bytes, larger than .*33554432 bytes"):
                ada.submit(len, np.zeros(40 << 20, dtype=np.uint8))
            assert ada._transfer.uploads == 0
            # Beyond the capacity in total, not one by one: unreferenced objects are evicted.
            for i in range(4):
                assert ada.submit(pick, np.full(12 << 20, i, dtype=np.uint8), 0).result(
                    timeout=CALL_SECONDS) == i
            f = ada.submit(make, 1 << 20)
            f.exception(timeout=CALL_SECONDS)
            oid = f.remote_id
            # Bob cannot read ada's result, nor find it with "has it?", nor pass it to a call.
            with pytest.raises(bulletin.BulletinError, match="NOT_FOUND"):
                bob._transfer.fetch(oid, 4 << 20)
            from bulletin._proto import bulletin_pb2 as pb
            assert not bob._conn.call(bob._conn.stub.HasObjects, pb.HasObjectsRequest(ids=[oid]),
                                      "HasObjects").present[0]
            from bulletin._data._objects import Ref
            stolen = Ref(oid, 4 << 20, "pickle", None)
            with pytest.raises(bulletin.BulletinError, match="not in this user's store"):
                bob.submit(total, stolen).result(timeout=CALL_SECONDS)
            assert f.result(timeout=CALL_SECONDS)[3] == 3.0
            assert_serves(ada)
    finally:
        cluster.stop()


def _scatter_released(client, value):
    """Scatters ``value`` and releases it again: the store keeps it unreferenced."""
    before = referenced_objects(client)
    ref = client.scatter(value)
    ref.release()
    wait_until(lambda: referenced_objects(client) == before, timeout=10,
               what="the released object to be unreferenced")


def test_a_released_objects_memory_takes_the_next_write_of_its_size(client):
    maps = client._transfer._maps
    # Without arena spares for a moment: a write with one ready takes it instead.
    spares, maps.spares = maps.spares, None
    try:
        _scatter_released(client, np.full(1 << 21, 1.0, dtype=np.float32))
        recycled = maps.recycled_writes
        b = np.full(1 << 21, 2.0, dtype=np.float32)
        assert client.submit(total, b).result(timeout=CALL_SECONDS) == float(b.sum())
        assert maps.recycled_writes == recycled + 1, "the write did not reuse the released file"
    finally:
        maps.spares = spares


def test_a_file_someone_still_maps_is_never_overwritten(client):
    """A zero-copy result the caller keeps after releasing it, or an argument an executor kept
    in a global, maps the file: reusing it would change their array under them."""
    maps = client._transfer._maps
    a = np.full(1 << 21, 3.0, dtype=np.float32)
    ref = client.scatter(a)
    f = client.submit(lambda x: x, ref)  # the result is the scattered object itself
    kept = f.result(timeout=CALL_SECONDS)  # mapped here, zero copy
    del f
    before = referenced_objects(client)
    ref.release()
    wait_until(lambda: referenced_objects(client) < before, timeout=10,
               what="the scattered object to be released")
    recycled = maps.recycled_writes
    # Smaller than the released object: reusing its file would also cut it short under `kept`
    # (a read of the tail would then kill this process with SIGBUS).
    b = np.full(3 << 19, 4.0, dtype=np.float32)
    assert client.submit(total, b).result(timeout=CALL_SECONDS) == float(b.sum())
    assert maps.recycled_writes == recycled
    np.testing.assert_array_equal(kept, a)


def test_an_array_changed_in_place_holds_only_its_current_content(client):
    a = np.zeros(1 << 20, dtype=np.float32)
    assert client.submit(pick, a, 0).result(timeout=CALL_SECONDS) == 0.0
    held = referenced_objects(client)
    for i in range(1, 4):
        a[0] = i  # a buffer refilled in place, as a training loop does
        assert client.submit(pick, a, 0).result(timeout=CALL_SECONDS) == float(i)
    wait_until(lambda: referenced_objects(client) == held, timeout=10,
               what=f"earlier contents to be released ({referenced_objects(client)} held, "
                    f"{held} expected)")


def test_a_buffer_refilled_in_place_is_written_into_its_earlier_contents_file(client):
    """A loop refilling one buffer and passing it to call after call: once a call has ended,
    its executor lets go of the argument's file, and the client lets go of the old content
    before it writes the new one, so the new content goes into the old content's file (memory
    the store has already) instead of a spare made again, or fresh memory."""
    from bulletin._data._write_maps import _exclusive
    maps = client._transfer._maps

    def nobody_else_maps_what_we_wrote() -> bool:
        with maps._lock:
            fds = [m.fd for m in maps._maps.values()]
        return all(_exclusive(fd) for fd in fds)

    a = np.zeros(1 << 21, dtype=np.float32)
    recycled = maps.recycled_writes
    for i in range(1, 6):
        a[0] = i  # a training loop's next batch, in the same buffer
        assert client.submit(pick, a, 0).result(timeout=CALL_SECONDS) == float(i)
        wait_until(nobody_else_maps_what_we_wrote, timeout=10,
                   what="the executor to let go of the argument's file after its call")
    # Not every write: the first has nothing to recycle, and a release travels on the session
    # stream, beside the "has it?" of the next write.
    assert maps.recycled_writes >= recycled + 2, "the loop's writes did not reuse their files"


def test_results_reuse_released_memory_and_never_a_result_still_held(client):
    """The executor writes a large result into a released result's file when nobody maps it:
    here the caller keeps the first result's array, so only later ones are reused."""
    def full(value):
        return np.full(1 << 21, value, dtype=np.float32)

    f = client.submit(full, 1.0)
    kept = f.result(timeout=CALL_SECONDS)  # mapped here after the Future let its object go
    del f
    recycled = client.status().store["recycled_files"]
    for value in (2.0, 3.0, 4.0):
        np.testing.assert_array_equal(client.submit(full, value).result(timeout=CALL_SECONDS),
                                      full(value))
    np.testing.assert_array_equal(kept, full(1.0))
    assert client.status().store["recycled_files"] > recycled
