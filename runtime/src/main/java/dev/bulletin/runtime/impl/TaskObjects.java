package dev.bulletin.runtime.impl;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.protocol.TaskSpec;
import dev.bulletin.runtime.task.Task;
import java.util.ArrayList;
import java.util.List;

/**
 * The store references a call holds from submit to end: its arguments and every object they
 * refer to, all in the caller's namespace (another user's objects cannot be named).
 */
final class TaskObjects {
  private TaskObjects() {}

  record Accepted(ObjectKey args, List<ObjectKey> refs) {}

  /** Takes one reference on the arguments and on each referenced object, or none at all. */
  static Accepted accept(ObjectStore store, String namespace, TaskSpec spec) {
    List<ObjectKey> taken = new ArrayList<>();
    try {
      ObjectKey args = key(namespace, spec.getArgs());
      retain(store, args, spec.getArgs(), "argument");
      taken.add(args);
      List<ObjectKey> refs = new ArrayList<>();
      for (ObjectRef ref : spec.getRefsList()) {
        ObjectKey key = key(namespace, ref);
        retain(store, key, ref, "referenced");
        taken.add(key);
        refs.add(key);
      }
      return new Accepted(args, refs);
    } catch (RuntimeException e) {
      taken.forEach(store::release);
      throw e;
    }
  }

  static ObjectKey key(String namespace, ObjectRef ref) {
    return new ObjectKey(namespace, ObjectId.parse(ref.getId()));
  }

  /** Stores inline bytes, or takes a reference on an object already in the store. */
  static void retain(ObjectStore store, ObjectKey key, ObjectRef ref, String what) {
    if (!ref.getInlineData().isEmpty() || ref.getSize() == 0) {
      store.put(key, ref.getInlineData().asReadOnlyByteBuffer());
      return;
    }
    if (!store.retainIfPresent(key)) {
      throw new ObjectStoreException(what + " object " + key.id() + " is not in this user's"
          + " store on the cluster; upload it (PutObject or AdoptObject) or send it inline");
    }
  }

  static void release(ObjectStore store, Task task) {
    store.release(task.args());
    task.refs().forEach(store::release);
  }
}
