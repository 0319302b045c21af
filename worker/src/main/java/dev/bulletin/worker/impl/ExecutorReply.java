package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectId;
import io.vertx.core.json.DecodeException;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * What an executor answers to a call: one JSON object, written in one place on the Python side
 * ({@code bulletin._runtime._wire.to_wire}) and parsed and validated here. User code runs in the
 * executor, so a reply is untrusted input: anything malformed is refused, naming what.
 */
sealed interface ExecutorReply {

  /**
   * The call ended: its result (or error envelope, {@code raised}) is in the result file, or the
   * store already holds {@code result}.
   *
   * @param retire why the executor must not run another call (a limit the call changed that
   *     cannot be set back), if so
   * @param keeps the bytes of the values the executor keeps between calls (issue 29; 0: none):
   *     it is asked to spill them before it ends ({@link ResidentSpills})
   * @param leasedCalls the calls a lease ran, when this call was one (issue 30), else -1
   */
  record Finished(ObjectId result, long size, boolean raised, double runSeconds,
      Optional<String> retire, long keeps, long leasedCalls) implements ExecutorReply {

    /** An executor that keeps no values between calls. */
    Finished(ObjectId result, long size, boolean raised, double runSeconds,
        Optional<String> retire) {
      this(result, size, raised, runSeconds, retire, 0, -1);
    }
  }

  /**
   * A large result is encoded and waits for its file: the agent may stage a released object's
   * file at the result path, then calls {@code commit}.
   *
   * @param mapped objects whose files the executor still maps (given back first)
   */
  record Stage(long size, List<ObjectId> mapped, boolean spareReady) implements ExecutorReply {
    /** An older executor's reply: no word on spares. */
    Stage(long size, List<ObjectId> mapped) {
      this(size, mapped, false);
    }
  }

  /**
   * The executor could not load the call and an earlier call may have damaged it: the call did
   * not run; the executor must be retired and the call run on a fresh one.
   */
  record Unfit(String reason) implements ExecutorReply {}

  /** Thrown for a reply that is not one of the above. */
  final class MalformedReplyException extends RuntimeException {
    MalformedReplyException(String message) {
      super(message);
    }
  }

  static ExecutorReply parse(String text) {
    if (text == null) {
      throw new MalformedReplyException("the executor's reply is empty");
    }
    JsonObject fields;
    try {
      fields = new JsonObject(text);
    } catch (DecodeException | ClassCastException e) {
      throw new MalformedReplyException("the executor's reply is not a JSON object: "
          + quote(text));
    }
    String kind = text(fields, "kind");
    return switch (kind) {
      case "finished" -> new Finished(id(fields, "result"), size(fields), flag(fields, "raised"),
          seconds(fields), Optional.ofNullable(optionalText(fields, "retire")),
          fields.containsKey("keeps") ? count(fields, "keeps") : 0,
          fields.containsKey("calls") ? count(fields, "calls") : -1);
      case "stage" -> new Stage(size(fields), ids(fields, "mapped"),
          fields.containsKey("spare_ready") && flag(fields, "spare_ready"));
      case "unfit" -> new Unfit(text(fields, "reason"));
      default -> throw new MalformedReplyException("the executor's reply has an unknown kind "
          + quote(kind) + " (finished, stage or unfit): " + quote(text));
    };
  }

  private static String text(JsonObject fields, String name) {
    String value = optionalText(fields, name);
    if (value == null || value.isEmpty()) {
      throw new MalformedReplyException("the executor's reply has no '" + name + "': "
          + quote(fields.encode()));
    }
    return value;
  }

  private static String optionalText(JsonObject fields, String name) {
    Object value = fields.getValue(name);
    if (value != null && !(value instanceof String)) {
      throw new MalformedReplyException("the executor's reply has a '" + name
          + "' that is not text: " + quote(String.valueOf(value)));
    }
    return (String) value;
  }

  private static ObjectId id(JsonObject fields, String name) {
    String value = text(fields, name);
    try {
      return ObjectId.parse(value);
    } catch (IllegalArgumentException e) {
      throw new MalformedReplyException("the executor's reply has a '" + name
          + "' that is not an object id: " + quote(value));
    }
  }

  private static List<ObjectId> ids(JsonObject fields, String name) {
    Object value = fields.getValue(name);
    if (!(value instanceof JsonArray array)) {
      throw new MalformedReplyException("the executor's reply has no '" + name
          + "' list: " + quote(fields.encode()));
    }
    List<ObjectId> ids = new ArrayList<>(array.size());
    for (Object item : array) {
      try {
        ids.add(ObjectId.parse((String) item));
      } catch (IllegalArgumentException | ClassCastException | NullPointerException e) {
        throw new MalformedReplyException("the executor's reply has a '" + name
            + "' entry that is not an object id: " + quote(String.valueOf(item)));
      }
    }
    return List.copyOf(ids);
  }

  private static long size(JsonObject fields) {
    return count(fields, "size");
  }

  private static long count(JsonObject fields, String name) {
    Object value = fields.getValue(name);
    if (!(value instanceof Integer || value instanceof Long) || ((Number) value).longValue() < 0) {
      throw new MalformedReplyException("the executor's reply has a '" + name + "' that is not"
          + " a non-negative integer: " + quote(String.valueOf(value)));
    }
    return ((Number) value).longValue();
  }

  private static double seconds(JsonObject fields) {
    Object value = fields.getValue("run_seconds");
    if (!(value instanceof Number number) || !(number.doubleValue() >= 0)
        || Double.isInfinite(number.doubleValue())) {
      throw new MalformedReplyException("the executor's reply has a 'run_seconds' that is not"
          + " a non-negative number: " + quote(String.valueOf(value)));
    }
    return number.doubleValue();
  }

  private static boolean flag(JsonObject fields, String name) {
    Object value = fields.getValue(name);
    if (!(value instanceof Boolean flag)) {
      throw new MalformedReplyException("the executor's reply has a '" + name
          + "' that is not true or false: " + quote(String.valueOf(value)));
    }
    return flag;
  }

  /** Quoted and cut short: a reply can be anything user code made the executor send. */
  private static String quote(String text) {
    String cut = text.length() > 200 ? text.substring(0, 200) + "..." : text;
    return "'" + cut + "'";
  }
}
