package dev.bulletin.worker;

import dev.bulletin.bridge.ObjectKey;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * One call for a worker to run: the function, arguments and the objects the arguments refer to
 * are already in the worker's store (in the caller's namespace), and the GPUs are the ones the
 * scheduler reserved for it. The result is stored in the arguments' namespace.
 *
 * @param runAs the Unix account the call owner's executors run as (users[].run_as), if any
 * @param executor its memory limit and Python environment ({@link ExecutorSpec#NONE}: none)
 * @param session the client session that submitted it ("" when unknown): the resident values
 *     the call keeps are that session's, and go when it ends ({@link WorkerAgent#dropResident})
 * @param restore resident values that another worker spilled and the call may need: handle id
 *     to its spill object, which is one of {@code refs} (the runtime brought it here); added to
 *     the user's own spills for this call, where the agent's own spill of a handle wins
 * @param residentLost why resident values the call names are gone, as the runtime knows it
 *     (handle id to the reason); the agent's own reasons win
 */
public record CallRequest(String taskId, ObjectKey function, ObjectKey args, List<ObjectKey> refs,
    List<Integer> gpuIds, Optional<String> runAs, ExecutorSpec executor, String session,
    Map<String, ObjectKey> restore, Map<String, String> residentLost) {
  public CallRequest {
    refs = List.copyOf(refs);
    gpuIds = List.copyOf(gpuIds);
    runAs = runAs == null ? Optional.empty() : runAs.filter(account -> !account.isEmpty());
    executor = executor == null ? ExecutorSpec.NONE : executor;
    session = session == null ? "" : session;
    restore = restore == null ? Map.of() : Map.copyOf(restore);
    residentLost = residentLost == null ? Map.of() : Map.copyOf(residentLost);
    for (ObjectKey spill : restore.values()) {
      if (!spill.namespace().equals(args.namespace())) {
        throw new IllegalArgumentException("a call restores spills of its own user only, not "
            + spill);
      }
    }
  }

  public CallRequest(String taskId, ObjectKey function, ObjectKey args, List<ObjectKey> refs,
      List<Integer> gpuIds, Optional<String> runAs, ExecutorSpec executor, String session) {
    this(taskId, function, args, refs, gpuIds, runAs, executor, session, Map.of(), Map.of());
  }

  public CallRequest(String taskId, ObjectKey function, ObjectKey args, List<ObjectKey> refs,
      List<Integer> gpuIds, Optional<String> runAs, ExecutorSpec executor) {
    this(taskId, function, args, refs, gpuIds, runAs, executor, "");
  }

  public CallRequest(String taskId, ObjectKey function, ObjectKey args, List<ObjectKey> refs,
      List<Integer> gpuIds, Optional<String> runAs) {
    this(taskId, function, args, refs, gpuIds, runAs, ExecutorSpec.NONE);
  }

  public CallRequest(String taskId, ObjectKey function, ObjectKey args, List<ObjectKey> refs,
      List<Integer> gpuIds) {
    this(taskId, function, args, refs, gpuIds, Optional.empty());
  }

  public CallRequest(String taskId, ObjectKey function, ObjectKey args, List<Integer> gpuIds) {
    this(taskId, function, args, List.of(), gpuIds);
  }

  /** The user the call runs for: its objects' namespace (ObjectKey#namespaceOf the user). */
  public String owner() {
    return args.namespace();
  }
}
