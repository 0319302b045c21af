package dev.bulletin.runtime.control;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.protocol.FailureCode;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.protocol.RuntimeTimings;
import dev.bulletin.protocol.TaskSpec;
import dev.bulletin.runtime.api.ClientSession;
import dev.bulletin.runtime.api.TaskEvents;
import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.runtime.objects.TaskObjects;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskTable;
import dev.bulletin.worker.ExecutorSpec;
import java.time.Duration;

/**
 * The checks a submitted call passes before it is a {@link Task}: a unique id, a journal that
 * can record it, a known QoS class, sane numbers, and objects the session may use (its function
 * held once per session). A call that fails one is answered at once with what was wrong and
 * becomes nothing; the cluster goes on.
 */
final class Admission {

  private final TaskTable tasks;
  private final Journaling journaling;
  private final PolicyPass policy;
  private final ObjectDirectory objects;

  Admission(TaskTable tasks, Journaling journaling, PolicyPass policy, ObjectDirectory objects) {
    this.tasks = tasks;
    this.journaling = journaling;
    this.policy = policy;
    this.objects = objects;
  }

  /**
   * The call as a task, not yet in the table; null when it was refused (the session was told
   * why) or is the same call sent again by a reconnecting client (accepted already).
   */
  Task admit(ClientSession session, TaskSpec spec) {
    String taskId = spec.getTaskId();
    if (taskId.isBlank()) {
      session.send(TaskEvents.failed("", FailureCode.INVALID_REQUEST,
          "a submitted call needs a task_id", RuntimeTimings.getDefaultInstance()));
      return null;
    }
    var known = tasks.get(taskId);
    if (known.isPresent() && known.get().sink() == session) {
      return null; // sent again by a reconnecting client whose SubmitReply was lost
    }
    if (known.isPresent()) {
      return reject(session, taskId, "task id " + taskId + " is already in use; ids must be "
          + "unique");
    }
    String unjournaled = journaling.failure(); // read once: the writer thread may clear it
    if (unjournaled != null) {
      session.send(TaskEvents.failed(taskId, FailureCode.INTERNAL, unjournaled,
          RuntimeTimings.getDefaultInstance()));
      return null;
    }
    if (spec.getTimeoutSeconds() < 0) {
      return reject(session, taskId, "timeout must be >= 0 seconds, got "
          + spec.getTimeoutSeconds());
    }
    var qos = policy.policy().qosFor(spec.getQos());
    if (qos.isEmpty()) {
      return reject(session, taskId, "qos '" + spec.getQos() + "' is not a QoS class of this "
          + "cluster (known: " + String.join(", ", policy.policy().qosNames()) + ")");
    }
    String handles = residentHandlesProblem(spec);
    if (handles != null) {
      return reject(session, taskId, handles);
    }
    if (!(spec.getCredits() >= 0)) {
      return reject(session, taskId, "credits must be >= 0, got " + spec.getCredits());
    }
    Demand demand;
    ObjectKey function;
    TaskObjects.Accepted accepted;
    ExecutorSpec executorSpec;
    try {
      executorSpec = ExecutorSpec.of(spec.getResources().getMemoryBytes(), spec.getEnvironment());
      demand = new Demand(spec.getResources().getGpus(), spec.getResources().getCpus(),
          spec.getResources().getMemoryBytes(), spec.getResources().getGpuEighths());
      function = acceptFunction(session, spec.getFunction());
      accepted = TaskObjects.accept(objects, session.namespace(), spec);
    } catch (ObjectDirectory.ObjectLostException e) {
      session.send(TaskEvents.failed(taskId, FailureCode.WORKER_LOST, e.getMessage()
          + "; run the call that made it again", RuntimeTimings.getDefaultInstance()));
      return null;
    } catch (IllegalArgumentException | ObjectStoreException e) {
      return reject(session, taskId, e.getMessage());
    }
    Task task = new Task(taskId, spec.getName(), session.identity(), demand, function,
        accepted.args(), accepted.refs(), spec.getTimeoutSeconds(), session, System.nanoTime());
    task.allowRetries(spec.getRetries());
    task.needsExecutor(executorSpec);
    // Looked up in the caller's namespace only: naming another user's id finds nothing.
    task.readsResident(spec.getResidentHandlesList(), spec.getPreferWorker());
    if (spec.getLease()) {
      task.usage().leased(0); // until its executor says how many calls it ran
    }
    // A call without a timeout may run for its QoS class's longest walltime, and is stopped then.
    task.scheduling(qos.get().name(), spec.getPriority(), spec.getCredits(),
        spec.getTimeoutSeconds() > 0
            ? Duration.ofMillis((long) (spec.getTimeoutSeconds() * 1000))
            : qos.get().maxWalltime());
    return task;
  }

  /** At most this many resident handles per call (a cell reads a few; a map a few each). */
  static final int MAX_RESIDENT_HANDLES = 4096;

  private static String residentHandlesProblem(TaskSpec spec) {
    if (spec.getResidentHandlesCount() > MAX_RESIDENT_HANDLES) {
      return "resident_handles names " + spec.getResidentHandlesCount() + " handles; at most "
          + MAX_RESIDENT_HANDLES;
    }
    for (String handle : spec.getResidentHandlesList()) {
      if (!handle.matches("[0-9a-f]{1,64}")) {
        return "resident_handles: '" + (handle.length() > 70 ? handle.substring(0, 70) + "..."
            : handle) + "' is not a handle id (hex digits)";
      }
    }
    return null;
  }

  private static Task reject(ClientSession session, String taskId, String message) {
    session.send(TaskEvents.failed(taskId, FailureCode.INVALID_REQUEST, message,
        RuntimeTimings.getDefaultInstance()));
    return null;
  }

  private ObjectKey acceptFunction(ClientSession session, ObjectRef ref) {
    ObjectKey id = new ObjectKey(session.namespace(), ObjectId.parse(ref.getId()));
    if (session.holdsFunction(id)) {
      return id;
    }
    // Inline bytes, or an object the client uploaded (or found) before this submit.
    TaskObjects.retain(objects, id, ref, "function");
    session.holdFunction(id); // the session holds one reference per function, not one per call
    journaling.hold(session.id(), session.identity(), id, true, 1);
    return id;
  }
}
