package dev.bulletin.runtime.objects;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.protocol.TaskSpec;
import dev.bulletin.runtime.task.Task;
import java.util.ArrayList;
import java.util.List;

/**
 * The references a call holds from submit to end: its arguments and every object they refer to,
 * all in the caller's namespace (another user's objects cannot be named). A referenced object
 * may be a result kept on a remote worker: the {@link ObjectDirectory} counts those.
 */
public final class TaskObjects {
  private TaskObjects() {}

  public record Accepted(ObjectKey args, List<ObjectKey> refs) {}

  /** Takes one reference on the arguments and on each referenced object, or none at all. */
  public static Accepted accept(ObjectDirectory objects, String namespace, TaskSpec spec) {
    List<ObjectKey> taken = new ArrayList<>();
    try {
      ObjectKey args = key(namespace, spec.getArgs());
      retain(objects, args, spec.getArgs(), "argument");
      taken.add(args);
      List<ObjectKey> refs = new ArrayList<>();
      for (ObjectRef ref : spec.getRefsList()) {
        ObjectKey key = key(namespace, ref);
        retain(objects, key, ref, "referenced");
        taken.add(key);
        refs.add(key);
      }
      return new Accepted(args, refs);
    } catch (RuntimeException e) {
      taken.forEach(objects::release);
      throw e;
    }
  }

  static ObjectKey key(String namespace, ObjectRef ref) {
    return new ObjectKey(namespace, ObjectId.parse(ref.getId()));
  }

  /** Stores inline bytes, or takes a reference on an object already in the cluster. */
  public static void retain(ObjectDirectory objects, ObjectKey key, ObjectRef ref, String what) {
    if (!ref.getInlineData().isEmpty() || ref.getSize() == 0) {
      objects.store().put(key, ref.getInlineData().asReadOnlyByteBuffer());
      return;
    }
    objects.retain(key, what);
  }

  public static void release(ObjectDirectory objects, Task task) {
    objects.release(task.args());
    task.refs().forEach(objects::release);
  }
}
