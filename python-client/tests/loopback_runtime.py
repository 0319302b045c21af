"""A stand-in for the Java runtime, in Python on loopback, for the client's tests.

It speaks the real gRPC API (a real grpc server) and runs calls with the real Executor on a
real object store folder, in threads of this process instead of executor processes. Output
events come only from ``emit()``, which test functions call while they run here: capturing a
thread's prints is what the Java worker agent does and is out of scope.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from bulletin._executor import Executor
from bulletin._proto import bulletin_pb2 as pb
from bulletin._proto import bulletin_pb2_grpc as pb_grpc

_current = threading.local()


def emit(stream: str, text: str) -> None:
    """Sends output of the running call as the worker agent would (stream: stdout|stderr)."""
    _current.session.send(pb.TaskEvent(
        task_id=_current.task_id, state=pb.RUNNING,
        output=pb.Output(stream=pb.STDERR if stream == "stderr" else pb.STDOUT,
                         data=text.encode())))


class _Session:
    def __init__(self, runtime: LoopbackRuntime):
        self.runtime = runtime
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.functions: set[str] = set()
        self.cancelled: set[str] = set()

    def send(self, event) -> None:
        self.events.put(pb.ServerMessage(event=event))

    def submit(self, spec) -> None:
        rt = self.runtime
        rt.submitted.append(spec)
        for ref in (spec.function, spec.args):
            if ref.inline_data:
                (rt.store / ref.id).write_bytes(ref.inline_data)
        if spec.function.inline_data:
            rt.inline_functions.append(spec.function.id)
            self.functions.add(spec.function.id)
        problem = None
        if spec.function.id not in self.functions and not (rt.store / spec.function.id).exists():
            problem = f"function {spec.function.id} was never sent in this session"
        elif not (rt.store / spec.args.id).exists():
            problem = f"args object {spec.args.id} is missing"
        if problem:
            self.send(pb.TaskEvent(task_id=spec.task_id, state=pb.ERROR, failure=pb.TaskFailure(
                code=pb.INVALID_REQUEST, message=problem)))
            return
        if spec.function.id not in self.functions and spec.function.size > 0:
            self.functions.add(spec.function.id)  # uploaded with PutObject
        if spec.resources.gpus > rt.gpus:
            self.send(pb.TaskEvent(task_id=spec.task_id, state=pb.ERROR, failure=pb.TaskFailure(
                code=pb.INFEASIBLE, message=f"asks for {spec.resources.gpus} GPUs, the "
                                            f"largest worker has {rt.gpus}")))
            return
        self.send(pb.TaskEvent(task_id=spec.task_id, state=pb.QUEUED))
        rt.pool.submit(self._run, spec)

    def _run(self, spec) -> None:
        if spec.task_id in self.cancelled:
            return
        rt = self.runtime
        self.send(pb.TaskEvent(task_id=spec.task_id, state=pb.PLACED,
                               placement=pb.Placement(worker_id="loopback", simulated_gpus=True)))
        self.send(pb.TaskEvent(task_id=spec.task_id, state=pb.RUNNING))
        _current.session, _current.task_id = self, spec.task_id
        line = rt.executor.run(spec.task_id, spec.function.id, spec.args.id)
        if spec.task_id in self.cancelled:
            return
        kind, result_id, size, run_seconds = line.split()
        value = pb.ObjectRef(id=result_id, size=int(size))
        if int(size) <= rt.inline_limit:
            value.inline_data = (rt.store / result_id).read_bytes()
        raised = kind == "raised"
        self.send(pb.TaskEvent(
            task_id=spec.task_id, state=pb.ERROR if raised else pb.FINISHED,
            result=pb.TaskResult(value=value, raised=raised,
                                 timings=pb.RuntimeTimings(run_seconds=float(run_seconds)))))

    def cancel(self, task_id: str) -> None:
        self.runtime.cancels.append(task_id)
        self.cancelled.add(task_id)
        self.send(pb.TaskEvent(task_id=task_id, state=pb.CANCELLED))


class LoopbackRuntime(pb_grpc.BulletinServicer):
    def __init__(self, store: Path, token: str = "owner-token", inline_limit: int = 64 << 10,
                 gpus: int = 2, chunk_bytes: int = 256 << 10, port: int = 0):
        self.store, self.token, self.inline_limit, self.gpus = store, token, inline_limit, gpus
        self.chunk_bytes = chunk_bytes
        self.executor = Executor(store)
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="loopback-exec")
        self.submitted: list = []
        self.inline_functions: list[str] = []
        self.cancels: list[str] = []
        self.uploads: list[str] = []
        self.downloads: list[str] = []
        self.shutdown_requested = threading.Event()
        self.server = grpc.server(ThreadPoolExecutor(max_workers=16), options=[
            ("grpc.max_receive_message_length", 8 << 20), ("grpc.max_send_message_length", 8 << 20)])
        pb_grpc.add_BulletinServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=None)
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _authorize(self, context) -> None:
        if dict(context.invocation_metadata()).get("authorization") != f"Bearer {self.token}":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown token")

    def Hello(self, request, context):
        self._authorize(context)
        return pb.HelloReply(user="alice", group="lab", cluster_id="loopback",
                             runtime_version="test", inline_limit_bytes=self.inline_limit,
                             max_message_bytes=4 << 20)

    def Session(self, request_iterator, context):
        self._authorize(context)
        session = _Session(self)

        def read():
            try:
                for message in request_iterator:
                    if message.HasField("submit"):
                        session.submit(message.submit)
                    elif message.HasField("cancel"):
                        session.cancel(message.cancel.task_id)
            except grpc.RpcError:
                pass
            session.events.put(None)

        threading.Thread(target=read, daemon=True).start()
        context.add_callback(lambda: session.events.put(None))
        while True:
            message = session.events.get()
            if message is None:
                return
            yield message

    def PutObject(self, request_iterator, context):
        self._authorize(context)
        first = next(request_iterator)
        data = first.data + b"".join(chunk.data for chunk in request_iterator)
        assert len(data) == first.size
        (self.store / first.id).write_bytes(data)
        self.uploads.append(first.id)
        return pb.PutObjectReply(id=first.id, size=len(data))

    def GetObject(self, request, context):
        self._authorize(context)
        self.downloads.append(request.id)
        data = (self.store / request.id).read_bytes()
        for offset in range(0, len(data), self.chunk_bytes):
            yield pb.ObjectChunk(id=request.id if offset == 0 else "",
                                 size=len(data) if offset == 0 else 0,
                                 data=data[offset:offset + self.chunk_bytes])

    def Status(self, request, context):
        self._authorize(context)
        slots = pb.SlotCounts(total=self.gpus, reserved=1, busy=1)
        return pb.ClusterStatus(
            cluster_id="loopback", gpus=slots, cpus=pb.SlotCounts(total=4), running=1,
            workers=[pb.WorkerStatus(worker_id="w0", host="localhost", gpus=slots,
                                     cpus=pb.SlotCounts(total=4), memory_bytes=16 << 30,
                                     simulated_gpus=True, executors=3, idle_executors=2)],
            queue=[pb.QueuedTask(task_id="big-1", name="big", user="bob", position=1,
                                 resources=pb.Resources(gpus=2, cpus=1), reason="gpus busy")])

    def Shutdown(self, request, context):
        self._authorize(context)
        self.shutdown_requested.set()
        return pb.ShutdownReply()
