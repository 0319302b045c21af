package dev.bulletin.runtime.harness;

import dev.bulletin.protocol.SubmitReply;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.protocol.TaskSpec;
import dev.bulletin.protocol.TaskState;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.QosClass;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.IntFunction;

/**
 * The clients of {@code make bench-scale}: {@code count} users, each with a token of their own
 * (the runtime's config lists them, as a real cluster's does) and one session, all on one
 * Vert.x so that their threads can be told apart from the runtime's. The issue asks for "as
 * many clients as needed": in a class with a per-user cap (the default class runs 4 calls per
 * user at once) one user leaves most of a large cluster idle, so the bench brings enough users
 * to fill it ({@link #toFill}). Each user has a gRPC client (an HTTP/2 connection) of their
 * own, as each person's Python client would.
 */
final class BenchUsers implements AutoCloseable {

  /**
   * The clients' event loops ({@code -Dbulletin.bench.clientLoops}, Vert.x's default: twice the
   * cores). Every client shares this JVM and its loops; on loopback the runtime's write to a
   * client whose loop sleeps also pays for waking it, which a client on another host does not
   * cost the runtime.
   */
  private final Vertx vertx = Vertx.vertx(new io.vertx.core.VertxOptions().setEventLoopPoolSize(
      clientLoops()));
  private final List<HarnessClient> clients = new ArrayList<>();
  private final List<HarnessSession> sessions = new ArrayList<>();

  /** How many event loops the clients share; {@link LoopbackWrites}' readers get as many. */
  static int clientLoops() {
    return Integer.getInteger("bulletin.bench.clientLoops",
        io.vertx.core.VertxOptions.DEFAULT_EVENT_LOOP_POOL_SIZE);
  }

  /** Opens a session for each of {@code count} users; the runtime at {@code address}. */
  BenchUsers(String address, int count) {
    int colon = address.lastIndexOf(':');
    String host = address.substring(0, colon);
    int port = Integer.parseInt(address.substring(colon + 1));
    try {
      for (int u = 0; u < count; u++) {
        HarnessClient client = new HarnessClient(vertx, host, port, token(u));
        clients.add(client);
        sessions.add(client.openSession());
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /** How many users of a class keep {@code slots} busy: one when the class has no per-user cap. */
  static int toFill(int slots, String qos) {
    QosClass qosClass = PolicyConfig.defaults().qosFor(qos).orElseThrow();
    int cap = qosClass.maxCallsPerUser();
    return cap == QosClass.UNLIMITED ? 1 : Math.max(1, (slots + cap - 1) / cap);
  }

  static String name(int user) {
    return String.format(java.util.Locale.ROOT, "bench%05d", user);
  }

  static String token(int user) {
    return name(user) + "-token-0123456789";
  }

  /** The {@code users:} section that gives each user their token. */
  static String config(int count) {
    StringBuilder yaml = new StringBuilder("users:\n");
    for (int u = 0; u < count; u++) {
      yaml.append("  - {name: ").append(name(u)).append(", token: ").append(token(u))
          .append("}\n");
    }
    return yaml.toString();
  }

  /** The client threads: every event loop of the shared Vert.x. */
  Vertx vertx() {
    return vertx;
  }

  int count() {
    return sessions.size();
  }

  /**
   * Submits {@code calls} calls, numbered from 0, split evenly among the users (each user's in
   * Submits of at most 1,000, the client's own batch size), all sent before any reply is
   * awaited so that they queue together.
   */
  void submit(int calls, IntFunction<TaskSpec.Builder> spec) {
    List<Future<SubmitReply>> replies = new ArrayList<>();
    int next = 0;
    for (int u = 0; u < sessions.size(); u++) {
      int share = calls / sessions.size() + (u < calls % sessions.size() ? 1 : 0);
      List<TaskSpec.Builder> batch = new ArrayList<>();
      for (int i = 0; i < share; i++) {
        batch.add(spec.apply(next++));
        if (batch.size() == 1000 || i == share - 1) {
          replies.add(sessions.get(u).submitAsync(batch.toArray(TaskSpec.Builder[]::new)));
          batch.clear();
        }
      }
    }
    for (Future<SubmitReply> reply : replies) {
      HarnessClient.await(reply);
    }
  }

  /** The FINISHED events every session received so far. */
  List<TaskEvent> finished() {
    List<TaskEvent> finished = new ArrayList<>();
    for (HarnessSession session : sessions) {
      for (TaskEvent event : session.events().all()) {
        if (event.getState() == TaskState.FINISHED) {
          finished.add(event);
        }
      }
    }
    return finished;
  }

  /** The messages every session received so far (a batch of events is one). */
  long messages() {
    return sessions.stream().mapToLong(session -> session.events().messageCount()).sum();
  }

  /** The ids of the client's event loops, to leave out of the runtime's CPU. */
  Set<Long> threadIds() throws Exception {
    return ScaleRun.eventLoops(vertx);
  }

  @Override
  public void close() {
    for (HarnessSession session : sessions) {
      session.close();
    }
    for (HarnessClient client : clients) {
      client.close();
    }
    HarnessClient.await(vertx.close());
  }
}
