package dev.bulletin.bridge;

import java.lang.reflect.Field;
import java.nio.MappedByteBuffer;

/** Memory mappings of store files, released when their user is done rather than at a GC. */
public final class Mappings {
  private static final sun.misc.Unsafe UNSAFE = loadUnsafe();

  private Mappings() {}

  /**
   * Unmaps now. The JDK unmaps only when the buffer is collected, and until then the mapping
   * keeps the file's memory alive and makes the file look in use to whoever checks (a reuse's
   * scan of /proc/PID/maps, a writer's lease). The buffer, and every view of it, must not be
   * touched again: that would crash the process.
   */
  public static void unmap(MappedByteBuffer mapping) {
    UNSAFE.invokeCleaner(mapping);
  }

  private static sun.misc.Unsafe loadUnsafe() {
    try {
      Field field = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
      field.setAccessible(true);
      return (sun.misc.Unsafe) field.get(null);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }
}
