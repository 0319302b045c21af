package dev.bulletin.runtime.workers;

import com.google.protobuf.UnsafeByteOperations;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.protocol.RunCall;
import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.worker.CallRequest;
import java.util.HashSet;
import java.util.Set;

/**
 * A call as one remote worker gets it ({@link RunCall}): small objects inline, a function's
 * bytes only the first time, inputs another worker keeps named with where to fetch them. Kept
 * apart from {@link RemoteWorkerLink}, which moves the messages.
 */
final class RunCalls {
  private final String workerId;
  private final ObjectDirectory objects;
  private final long inlineLimit;
  /** Functions this worker already holds: later calls send their id only. */
  private final Set<ObjectKey> functionsSent = new HashSet<>();

  RunCalls(String workerId, ObjectDirectory objects, long inlineLimit) {
    this.workerId = workerId;
    this.objects = objects;
    this.inlineLimit = inlineLimit;
  }

  RunCall of(CallRequest request) {
    boolean functionKnown = !functionsSent.add(request.function());
    RunCall.Builder run = RunCall.newBuilder().setTaskId(request.taskId())
        .setFunction(ref(request.function(), !functionKnown))
        .setArgs(ref(request.args(), true)).addAllGpuIds(request.gpuIds())
        .setNamespace(request.args().namespace()).setRunAs(request.runAs().orElse(""))
        .setMemoryBytes(request.executor().memoryBytes())
        .setGpuFraction(request.executor().gpuFraction())
        .setEnvironment(request.executor().toProto()).setSession(request.session());
    if (!request.residentLost().isEmpty()) { // an empty putAll still makes the map field
      run.putAllResidentLost(request.residentLost());
    }
    request.restore().forEach((handle, spill) -> run.putRestore(handle, spill.id().hex()));
    // An input another worker keeps comes from there directly when both serve data ports.
    request.refs().forEach(key -> run.addRefs(objects.directSource(key, workerId)
        .map(direct -> ref(key, false).toBuilder().setDirect(direct).build())
        .orElseGet(() -> ref(key, false))));
    return run.build();
  }

  /**
   * The object's id and size, and its bytes when small enough and {@code withBytes} (the
   * function and arguments, always in the runtime's store; a ref may be kept on a worker).
   */
  private ObjectRef ref(ObjectKey id, boolean withBytes) {
    long size = objects.size(id);
    ObjectRef.Builder ref = ObjectRef.newBuilder().setId(id.id().hex()).setSize(size);
    if (withBytes && size <= inlineLimit) {
      // readSmall's array is a copy of our own: wrapped, not copied again.
      ref.setInlineData(UnsafeByteOperations.unsafeWrap(objects.store().readSmall(id)));
    }
    return ref.build();
  }
}
