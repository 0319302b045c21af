package dev.bulletin.bridge;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.nio.file.Path;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.function.Consumer;

/**
 * A node-local, content-addressed store of immutable objects, shared by the worker agent, the
 * Python executors and same-host clients. Objects are files {@code root()/namespace/id} on a
 * memory filesystem; they appear by atomic rename, so a reader never sees a partial object.
 *
 * <p>Objects are reference counted (futures, refs, running calls, sessions). An object with no
 * references stays cached until memory is needed, then it is evicted, least recently used first.
 * When referenced objects alone exceed the capacity, the least recently used are spilled to the
 * spill folder and read back on use. Implementations are thread-safe.
 */
public interface ObjectStore extends AutoCloseable {

  /** The memory folder holding every namespace's objects. */
  Path root();

  /** The spill folder, or null when the store does not spill. */
  Path spillRoot();

  long capacityBytes();

  /**
   * The folder of a namespace's published objects, created if needed. Only the store's owner
   * can add, rename or remove names in it; readers open its files by id.
   */
  Path folderOf(String namespace);

  /**
   * The folder where a namespace's writers put what they write ({@link #adopt}, the files
   * {@link #stageRecycled} and {@link #handOutSpare} hand them): inside {@link #folderOf}, and
   * the namespace account's own once {@link #giveFolderTo} gave it. The store treats every name
   * in it as hostile (see {@link UserFolder}).
   */
  Path stagingFolderOf(String namespace);

  /**
   * Gives a namespace to a Unix account: its staging folder becomes the account's (mode 0700),
   * its objects the account's to read (mode 0600, now and when published later), and the
   * objects folder and the memory folder passable by all (0711), never listable. Needs the
   * privilege to change owners.
   *
   * @throws ObjectStoreException if the owner cannot be changed
   */
  void giveFolderTo(String namespace, int uid, int gid);

  /** Stores bytes (if not already there) and takes one reference on them. */
  ObjectKey put(ObjectKey key, ByteBuffer bytes);

  /**
   * Starts a chunked write; room is made before the first byte is written, and the object
   * becomes visible only when the upload commits.
   *
   * @throws StoreFullException if the object is larger than the capacity or no room can be made
   */
  Upload beginUpload(ObjectKey key, long size);

  /**
   * Gives the memory of an unreferenced object to a same-host writer. On shared memory the
   * first write into fresh pages costs a page fault each (several times the copy itself); an
   * object nobody holds any more has its pages already allocated. The object leaves the store
   * and its file becomes {@code stagedName} in the namespace's staging folder, as it was: the writer
   * first makes sure no other process still maps it (a reader of the released object), and only
   * then truncates it to {@code size} (truncating a file someone maps would crash them on their
   * next read of the tail), overwrites it whole and calls {@link #adopt}. Only objects of the
   * same namespace are reused (their stale bytes are the same owner's), no larger than twice
   * {@code size}.
   *
   * @param preferred ids whose files the writer still has mapped: reused first, since writing
   *     through an existing mapping skips even the page-table work
   * @return whether a file was staged; false when no unreferenced object fits
   */
  default boolean stageRecycled(String namespace, long size, Collection<ObjectId> preferred,
      String stagedName) {
    return stageRecycled(namespace, size, preferred, false, stagedName);
  }

  /**
   * As {@link #stageRecycled(String, long, Collection, String)}; with {@code onlyPreferred},
   * only a file in {@code preferred} is staged. A writer with a pre-faulted spare of its own asks
   * so: any other released file may be mapped by another writer of the namespace (a client keeps
   * its uploads mapped, an executor its results), whose write lease then fails; the writer takes
   * its spare anyway, and the file is lost to the writer that maps it (issue 30.5: a client and
   * an executor each handed the other's file, and both spares made again, every call).
   */
  boolean stageRecycled(String namespace, long size, Collection<ObjectId> preferred,
      boolean onlyPreferred, String stagedName);

  /**
   * Hands a pre-faulted file of the host's arena ({@link StoreArena}) to a same-host writer of
   * {@code namespace}, as {@code stagedName} in its staging folder, at least {@code size} bytes long
   * (the writer truncates it to its object and calls {@link #adopt}).
   *
   * @return the file handed out, or none (always none when the store keeps no arena)
   */
  default StoreArena.Handout handOutSpare(String namespace, long size, String stagedName) {
    return StoreArena.Handout.REFUSED;
  }

  /** The store's arena, or null when it keeps none. */
  default StoreArena arena() {
    return null;
  }

  /**
   * What one same-host writer of {@code namespace} may keep pre-faulted ahead of need
   * (HelloReply.arena_bytes): what the host arena offers; where each namespace is a file system
   * of its own share instead (no file of a host arena can be renamed into it), spares the writer
   * makes itself inside that share. 0: none.
   */
  default long writerSpareBytes(String namespace) {
    StoreArena pool = arena();
    return pool == null ? 0 : pool.stats().budgetBytes();
  }

  /**
   * Publishes a file someone wrote (an executor's result, a same-host client's upload) under
   * its id, and takes one reference. {@code staged} must be a temporary (dot-prefixed) file in
   * the key's staging folder. If the object already exists the staged file is deleted (or need
   * not exist: a writer that saw the object may skip writing it).
   *
   * @throws ObjectStoreException if the staged file is missing or in the wrong place
   * @throws UserFolder.RefusedFileException if it is not a plain file of the namespace's
   *     account with one link (a link, a FIFO, a folder...): it is deleted, nothing published
   */
  ObjectKey adopt(ObjectKey key, Path staged);

  /** Whether the object is visible (in memory or spilled). */
  boolean contains(ObjectKey key);

  /** Takes a reference if the object is present; the answer to "has it?". */
  boolean retainIfPresent(ObjectKey key);

  /** Size in bytes. @throws ObjectStoreException if absent */
  long size(ObjectKey key);

  /** Size, metadata and where it lives. @throws ObjectStoreException if absent */
  ObjectInfo info(ObjectKey key);

  /** Maps the object read-only (from memory, or from the spill folder). */
  ByteBuffer read(ObjectKey key);

  /** Copies a small object into a heap array. @throws ObjectStoreException if absent */
  byte[] readSmall(ObjectKey key);

  /**
   * Holds objects in memory while a call uses them: they are read back from the spill folder if
   * they fit, and none of them is spilled or evicted until the lease closes.
   *
   * @throws ObjectStoreException if one is absent
   */
  Lease lease(Collection<ObjectKey> keys);

  /** Takes one more reference. @throws ObjectStoreException if absent */
  void retain(ObjectKey key);

  /** Drops one reference; the object stays cached (evictable) when none are left. */
  void release(ObjectKey key);

  /** Deletes the unreferenced objects of a namespace and its stale staged files. */
  void dropUnreferenced(String namespace, String stagedPrefix);

  /**
   * Deletes the entries of a namespace's staging folder whose names start with {@code prefix}
   * (what a writer that ended left there), by descriptors that never follow a link.
   */
  void deleteStaged(String namespace, String prefix);

  /**
   * Deletes every object nobody references, in every namespace: after a restart has retained
   * what its journal names, what is left is what nothing will ask for.
   *
   * @return how many were deleted
   */
  int dropUnreferencedObjects();

  /** Visible objects (referenced or cached). */
  int objectCount();

  StoreStats stats();

  /** Removes every object, the store's folders and its spill folder. */
  @Override
  void close();

  /** An object being written in chunks. */
  interface Upload extends AutoCloseable {
    void write(ByteBuffer chunk);

    /**
     * Reads the rest of the object from {@code source} straight into the store's memory, if
     * that memory is allocated already (a released object's file taken over for this upload):
     * one copy, where {@link #write} from the caller's buffer costs two. {@code received} sees
     * each slice once it is filled, while it is still in cache (to check it). Returns false,
     * having read nothing, when the object goes into fresh memory: there allocating the pages
     * is the slow part, and {@link #write} overlaps it with the caller's reading better than a
     * mapping can (each page would fault).
     *
     * @param helper runs the mapping's page-table work ahead of the reader
     * @throws java.io.EOFException if the source ends before the object is complete
     */
    boolean receiveInPlace(ReadableByteChannel source, Consumer<ByteBuffer> received,
        Executor helper) throws IOException;

    long written();

    /**
     * Checks the size, then makes the object visible with one reference.
     *
     * @throws ObjectStoreException if fewer or more bytes came than announced
     */
    ObjectKey commit();

    /** Discards the partial object and its reserved room; safe after commit. */
    @Override
    void close();
  }

  /** Objects held in memory for a call; {@link #path} is where the executor opens each. */
  interface Lease extends AutoCloseable {
    List<ObjectKey> keys();

    Path path(ObjectKey key);

    @Override
    void close();
  }
}
