package dev.bulletin.worker;

import dev.bulletin.bridge.ObjectKey;
import java.util.List;
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
 */
public record CallRequest(String taskId, ObjectKey function, ObjectKey args, List<ObjectKey> refs,
    List<Integer> gpuIds, Optional<String> runAs, ExecutorSpec executor, String session) {
  public CallRequest {
    refs = List.copyOf(refs);
    gpuIds = List.copyOf(gpuIds);
    runAs = runAs == null ? Optional.empty() : runAs.filter(account -> !account.isEmpty());
    executor = executor == null ? ExecutorSpec.NONE : executor;
    session = session == null ? "" : session;
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
