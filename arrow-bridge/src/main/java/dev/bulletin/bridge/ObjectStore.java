package dev.bulletin.bridge;

import java.nio.ByteBuffer;
import java.nio.file.Path;

/**
 * A node-local, content-addressed store of immutable objects, shared by the worker agent and the
 * Python executors of one host. Executors open objects by path, so bytes never cross Py4J.
 *
 * <p>Objects are reference counted: whoever puts or retains an object releases it when done, and
 * an object with no references left is removed. Implementations are thread-safe.
 */
public interface ObjectStore extends AutoCloseable {

  /** The folder holding the objects; {@code root().resolve(id.hex())} is an object's file. */
  Path root();

  /** Stores bytes (if not already there) and takes one reference on them. */
  ObjectId put(ByteBuffer bytes);

  /**
   * Stores bytes claimed to have the given id, and takes one reference.
   *
   * @throws ObjectStoreException if the bytes do not hash to {@code expected}
   */
  ObjectId put(ObjectId expected, ByteBuffer bytes);

  /** Starts a chunked write; the object becomes visible only when the upload commits. */
  Upload beginUpload(ObjectId expected, long size);

  boolean contains(ObjectId id);

  /** Size in bytes. @throws ObjectStoreException if absent */
  long size(ObjectId id);

  /** Maps the object read-only. @throws ObjectStoreException if absent */
  ByteBuffer read(ObjectId id);

  /**
   * Copies a small object into a heap array; cheaper than {@link #read} for a few KiB, where
   * mapping costs more than it saves. @throws ObjectStoreException if absent
   */
  byte[] readSmall(ObjectId id);

  /**
   * Takes one more reference on an object already in the store (for example, one written by an
   * executor). @throws ObjectStoreException if absent
   */
  void retain(ObjectId id);

  /** Drops one reference; the object is removed when none are left. */
  void release(ObjectId id);

  /** Objects currently stored, for status and leak checks. */
  int objectCount();

  /** Removes every object and the store's folder. */
  @Override
  void close();

  /** An object being written in chunks. */
  interface Upload extends AutoCloseable {
    void write(ByteBuffer chunk);

    /**
     * Checks size and hash, then makes the object visible with one reference.
     *
     * @throws ObjectStoreException if size or hash differ from what was announced
     */
    ObjectId commit();

    /** Discards the partial object; safe after commit. */
    @Override
    void close();
  }
}
