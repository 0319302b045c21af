package dev.bulletin.runtime.harness;

import com.google.protobuf.ByteString;
import dev.bulletin.protocol.CancelTask;
import dev.bulletin.protocol.ClientMessage;
import dev.bulletin.protocol.ObjectChunk;
import dev.bulletin.protocol.PutObjectReply;
import dev.bulletin.protocol.ReleaseObjects;
import dev.bulletin.protocol.ServerMessage;
import dev.bulletin.protocol.SubmitReply;
import dev.bulletin.protocol.SubmitRequest;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.protocol.TaskSpec;
import dev.bulletin.protocol.TaskState;
import io.vertx.grpc.client.GrpcClientRequest;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.zip.CRC32C;

/**
 * One client session: the Session stream (cancels up, task events down) and the Submit and
 * PutObject calls that name it. Every event that comes down is kept, in order, in an
 * {@link EventLog} the test reads ({@link #events}).
 */
public final class HarnessSession implements AutoCloseable {

  /** The metadata naming the session whose object holds an upload joins (GrpcApi's Sessions). */
  static final String SESSION_HEADER = "bulletin-session";

  private final HarnessClient client;
  private final String holdsId = "harness-" + UUID.randomUUID();
  private final EventLog events = new EventLog();
  private final GrpcClientRequest<ClientMessage, ServerMessage> stream;
  private final String sessionId;
  private boolean ended;

  HarnessSession(HarnessClient client) {
    this.client = client;
    this.stream = HarnessClient.await(client.request(
        HarnessClient.<ServerMessage, ClientMessage>method("Session", ServerMessage.newBuilder()),
        Map.of(SESSION_HEADER, holdsId)));
    stream.response().onSuccess(response -> {
      response.handler(events::record);
      response.endHandler(ignored -> events.streamEnded(response.status() + " "
          + response.statusMessage()));
      response.exceptionHandler(error -> events.streamEnded(error.toString()));
    }).onFailure(error -> events.streamEnded(error.toString()));
    // A message of no consequence: the client sends the stream's headers with its first one,
    // and the runtime opens the session when they arrive.
    stream.write(ClientMessage.newBuilder().setRelease(ReleaseObjects.getDefaultInstance())
        .build());
    this.sessionId = events.awaitOpened();
  }

  public String id() {
    return sessionId;
  }

  /** The events of this session so far, and a way to wait for more. */
  public EventLog events() {
    return events;
  }

  /**
   * Uploads an object with PutObject (one chunk, CRC32C-checked) under this session: the
   * session holds it, so a call can name it by id.
   */
  public PutObjectReply upload(PythonCalls.EncodedObject object) {
    CRC32C crc = new CRC32C();
    crc.update(object.bytes());
    int checksum = (int) crc.getValue();
    ObjectChunk chunk = ObjectChunk.newBuilder().setId(object.id()).setSize(object.size())
        .setData(ByteString.copyFrom(object.bytes())).setOffset(0).setCrc32C(checksum)
        .setObjectCrc32C(checksum).setLast(true).build();
    return client.call(HarnessClient.method("PutObject", PutObjectReply.newBuilder()), chunk,
        Map.of(SESSION_HEADER, holdsId));
  }

  /** Submits calls in one Submit, in order. */
  public void submit(TaskSpec.Builder... specs) {
    HarnessClient.await(submitAsync(specs));
  }

  /** Submits calls in one Submit, in order, without waiting for its reply. */
  public io.vertx.core.Future<SubmitReply> submitAsync(TaskSpec.Builder... specs) {
    SubmitRequest.Builder request = SubmitRequest.newBuilder().setSessionId(sessionId);
    for (TaskSpec.Builder spec : specs) {
      request.addTasks(spec);
    }
    return client.callAsync(HarnessClient.method("Submit", SubmitReply.newBuilder()),
        request.build(), Map.of());
  }

  public void cancel(String taskId) {
    stream.write(ClientMessage.newBuilder().setCancel(CancelTask.newBuilder().setTaskId(taskId))
        .build());
  }

  /** Half-closes the stream, as a client does when it closes: the session ends. */
  public void end() {
    if (!ended) {
      ended = true;
      HarnessClient.await(stream.end());
    }
  }

  /** Shorthands for the event log's waits. */
  public TaskEvent awaitState(String taskId, TaskState state) {
    return events.await(taskId, state);
  }

  public TaskEvent awaitEnd(String taskId) {
    return events.awaitEnd(taskId);
  }

  public List<TaskState> states(String taskId) {
    return events.states(taskId);
  }

  @Override
  public void close() {
    end();
  }
}
