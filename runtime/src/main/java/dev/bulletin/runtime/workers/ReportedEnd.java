package dev.bulletin.runtime.workers;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.protocol.CallEnded;
import dev.bulletin.protocol.CallReturned;
import dev.bulletin.protocol.HeldObject;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.worker.CallOutcome;
import java.util.Optional;

/**
 * A remote worker's report of a call's end ({@link CallEnded}) read as the outcome the control
 * plane handles: kept apart from {@link RemoteWorkerLink}, which moves the messages.
 */
final class ReportedEnd {

  private ReportedEnd() {}

  /** The key a worker's report names, or none when it names no valid object. */
  static Optional<ObjectKey> keyOf(HeldObject held) {
    try {
      return held == null ? Optional.empty()
          : Optional.of(ObjectKey.of(held.getNamespace(), held.getId()));
    } catch (IllegalArgumentException malformed) {
      return Optional.empty();
    }
  }

  /**
   * What the call's end means to the runtime: its small result put in the runtime's store, a
   * large one recorded as kept on {@code workerId}.
   */
  static CallOutcome outcome(CallEnded ended, String namespace, String workerId,
      ObjectDirectory objects) {
    switch (ended.getOutcomeCase()) {
      case RETURNED -> {
        return returned(ended, namespace, workerId, objects);
      }
      case EXECUTOR_DIED -> {
        return new CallOutcome.ExecutorDied(ended.getExecutorDied());
      }
      case STOPPED -> {
        return new CallOutcome.Stopped(ended.getStopped());
      }
      case FAILED -> {
        return new CallOutcome.WorkerLost(ended.getFailed());
      }
      default -> {
        return new CallOutcome.WorkerLost("the worker sent an ending this runtime does not know;"
            + " are the worker and runtime versions the same?");
      }
    }
  }

  private static CallOutcome returned(CallEnded ended, String namespace, String workerId,
      ObjectDirectory objects) {
    CallReturned returned = ended.getReturned();
    ObjectRef ref = returned.getResult();
    try {
      ObjectKey id = new ObjectKey(namespace, ObjectId.parse(ref.getId()));
      com.google.protobuf.ByteString bytes = com.google.protobuf.ByteString.EMPTY;
      if (!ref.getInlineData().isEmpty() || ref.getSize() == 0) {
        // Carried on only when these bytes are what the store now holds under the id (an
        // object already there keeps its own).
        boolean stored = !objects.store().contains(id);
        objects.store().put(id, ref.getInlineData().asReadOnlyByteBuffer());
        bytes = stored ? ref.getInlineData() : bytes;
      } else if (returned.getKept()) {
        String kind = ended.getHeldList().stream().filter(h -> h.getId().equals(ref.getId()))
            .map(HeldObject::getKind).findFirst().orElse("");
        objects.kept(workerId, id, ref.getSize(), kind);
      } else {
        return new CallOutcome.WorkerLost("the worker reported a large result (" + id + ")"
            + " without keeping it; are the worker and runtime versions the same?");
      }
      return new CallOutcome.Returned(id, ref.getSize(), returned.getRaised(),
          returned.getRunSeconds(), returned.getResidentBytes(),
          returned.hasLeasedCalls() ? returned.getLeasedCalls() : -1, bytes);
    } catch (IllegalArgumentException | ObjectStoreException e) {
      return new CallOutcome.WorkerLost("its result could not be stored: " + e.getMessage());
    }
  }
}
