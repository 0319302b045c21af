package dev.bulletin.runtime.api;

import com.google.protobuf.ByteString;
import dev.bulletin.protocol.FailureCode;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.protocol.Output;
import dev.bulletin.protocol.OutputStream;
import dev.bulletin.protocol.Placement;
import dev.bulletin.protocol.RuntimeTimings;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.protocol.TaskFailure;
import dev.bulletin.protocol.TaskResult;
import dev.bulletin.protocol.TaskState;
import dev.bulletin.protocol.WaitDetail;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.plan.WaitInfo;
import java.util.List;

/** Builds the events a client sees; one method per kind of event. */
public final class TaskEvents {
  private TaskEvents() {}

  public static TaskEvent queued(String taskId) {
    return state(taskId, TaskState.QUEUED).build();
  }

  /** Back in the queue after a preemption, where it was; the passes explain any wait next. */
  public static TaskEvent preempted(String taskId, int preemptions) {
    return state(taskId, TaskState.QUEUED).setWait(WaitDetail.newBuilder().setPosition(1)
        .setReason("preempted to make room for a higher-priority call; it runs again, from its"
            + " checkpoint if it saved one, as soon as a GPU is free")
        .setCode(WaitCode.CAPACITY.name()).setPreemptions(preemptions)).build();
  }

  /** Still queued, and why: sent when the explanation changes. */
  public static TaskEvent waiting(String taskId, WaitInfo info, int preemptions) {
    WaitDetail.Builder wait = WaitDetail.newBuilder().setPosition(info.position())
        .setReason(info.reason()).setCode(info.code().name()).addAllSuggestions(info.suggestions())
        .setPreemptions(preemptions);
    info.eta().ifPresent(eta -> wait.setEta(eta.toEpochMilli() / 1000.0));
    return state(taskId, TaskState.QUEUED).setWait(wait).build();
  }

  /** The call started; where it runs comes with it (placing is not announced on its own). */
  public static TaskEvent running(String taskId, String workerId, List<Integer> gpuIds,
      boolean simulated) {
    return state(taskId, TaskState.RUNNING).setPlacement(Placement.newBuilder()
        .setWorkerId(workerId).addAllGpuIds(gpuIds).setSimulatedGpus(simulated)).build();
  }

  public static TaskEvent output(String taskId, boolean stderr, byte[] data) {
    return state(taskId, TaskState.RUNNING).setOutput(Output.newBuilder()
        .setStream(stderr ? OutputStream.STDERR : OutputStream.STDOUT)
        .setData(ByteString.copyFrom(data))).build();
  }

  public static TaskEvent result(String taskId, ObjectRef value, boolean raised, RuntimeTimings timings) {
    return state(taskId, raised ? TaskState.ERROR : TaskState.FINISHED).setResult(
        TaskResult.newBuilder().setValue(value).setRaised(raised).setTimings(timings)).build();
  }

  public static TaskEvent failed(String taskId, FailureCode code, String message, RuntimeTimings timings) {
    return state(taskId, TaskState.ERROR).setFailure(TaskFailure.newBuilder()
        .setCode(code).setMessage(message).setTimings(timings)).build();
  }

  public static TaskEvent cancelled(String taskId, String message) {
    return state(taskId, TaskState.CANCELLED).setFailure(TaskFailure.newBuilder()
        .setCode(FailureCode.CANCELLED_BY_USER).setMessage(message)).build();
  }

  private static TaskEvent.Builder state(String taskId, TaskState state) {
    return TaskEvent.newBuilder().setTaskId(taskId).setState(state);
  }
}
