package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.StoreFullException;
import dev.bulletin.bridge.StoreStats;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

/**
 * The store's table of objects and its memory accounting: which objects exist, their references
 * and leases, and the policy that makes room (evict the least recently used unreferenced object,
 * else spill the least recently used referenced one). Not thread-safe: the store's lock guards it.
 */
final class StoreTable {

  static final class Entry {
    final ObjectKey key;
    final long size;
    int references;
    int leases;
    boolean spilled;
    long lastUse;
    ArrowMetadata.Parsed metadata;
    /** The object's bytes, when it is small and kept in memory ({@link #keepSmall}); else null. */
    byte[] bytes;

    Entry(ObjectKey key, long size) {
      this.key = key;
      this.size = size;
    }
  }

  private final StoreLayout layout;
  private final long capacity;
  /** Gives what this table writes back into a namespace to its account. */
  private final NamespaceFolders folders;
  private final Map<ObjectKey, Entry> entries = new HashMap<>();
  /**
   * The same entries by namespace: what a session's end, a write looking for a file to reuse and
   * a user's eviction read (each scanned every user's objects: a runtime with many users and
   * objects paid that at each of its sessions' ends).
   */
  private final Map<String, Map<ObjectKey, Entry>> byNamespace = new HashMap<>();
  /** Bytes of in-memory objects plus room reserved by uploads in progress. */
  private long memoryBytes;
  private long spilledBytes;
  private long recycledFiles;
  private long clock;
  /**
   * The bytes of small objects are kept on their entries, so that a call's function and
   * arguments, read for every dispatch, come from memory: opening, reading and closing two files
   * per call were most of the event loop's system calls (make bench-scale, strace). Objects of
   * at most {@link #SMALL_BYTES}, {@link #SMALL_BUDGET} in all, first come first kept: a store of
   * a million small objects reads the rest from disk. An object's bytes never change under its
   * entry (a file handed to a writer leaves the table first), and they go with it.
   */
  static final int SMALL_BYTES = 16 * 1024;
  static final long SMALL_BUDGET = 32L << 20;
  private long smallBytes;

  StoreTable(StoreLayout layout, long capacity, NamespaceFolders folders) {
    this.layout = layout;
    this.capacity = capacity;
    this.folders = folders;
  }

  Entry get(ObjectKey key) {
    return entries.get(key);
  }

  Collection<Entry> all() {
    return entries.values();
  }

  /** The entries of one namespace; read-only, and not to be held across changes. */
  Collection<Entry> inNamespace(String namespace) {
    Map<ObjectKey, Entry> own = byNamespace.get(namespace);
    return own == null ? List.of() : java.util.Collections.unmodifiableCollection(own.values());
  }

  private void put(Entry entry) {
    entries.put(entry.key, entry);
    byNamespace.computeIfAbsent(entry.key.namespace(), ns -> new HashMap<>())
        .put(entry.key, entry);
  }

  private void forget(ObjectKey key) {
    Entry entry = entries.remove(key);
    if (entry != null && entry.bytes != null) {
      smallBytes -= entry.bytes.length;
      entry.bytes = null;
    }
    Map<ObjectKey, Entry> own = byNamespace.get(key.namespace());
    if (own != null && own.remove(key) != null && own.isEmpty()) {
      byNamespace.remove(key.namespace());
    }
  }

  int size() {
    return entries.size();
  }

  Entry add(ObjectKey key, long size) {
    Entry entry = new Entry(key, size);
    memoryBytes += size;
    touch(entry);
    put(entry);
    return entry;
  }

  /** An object found in the spill folder (a store that kept an earlier run's objects). */
  Entry addSpilled(ObjectKey key, long size) {
    Entry entry = new Entry(key, size);
    entry.spilled = true;
    spilledBytes += size;
    touch(entry);
    put(entry);
    return entry;
  }

  /**
   * Keeps {@code bytes} (the object's whole content, not to be changed afterwards) on its entry
   * when it is small enough and the budget allows.
   */
  void keepSmall(Entry entry, byte[] bytes) {
    if (entry.bytes == null && bytes.length == entry.size && roomForSmall(bytes.length)
        && entries.get(entry.key) == entry) {
      entry.bytes = bytes;
      smallBytes += bytes.length;
    }
  }

  /** Whether an object of {@code size} bytes would be kept in memory: worth copying its bytes. */
  boolean roomForSmall(long size) {
    return size <= SMALL_BYTES && smallBytes + size <= SMALL_BUDGET;
  }

  void touch(Entry entry) {
    entry.lastUse = ++clock;
  }

  void reserve(long size) {
    memoryBytes += size;
  }

  void unreserve(long size) {
    memoryBytes -= size;
  }

  /** Forgets an entry and deletes its file. */
  void remove(Entry entry) {
    Files2.deleteQuietly(layout.pathOf(entry));
    forget(entry.key);
    if (entry.spilled) {
      spilledBytes -= entry.size;
    } else {
      memoryBytes -= entry.size;
    }
  }

  /**
   * The unreferenced in-memory object of {@code namespace} whose file a writer of {@code size}
   * bytes may take over: one the writer still has mapped first, else the closest fit, never
   * more than twice the size (a large cached object is worth more than a small write's faults).
   */
  Entry recyclable(String namespace, long size, Set<ObjectId> preferred) {
    Entry best = null;
    boolean bestPreferred = false;
    for (Entry entry : inNamespace(namespace)) {
      if (entry.spilled || entry.references > 0 || entry.leases > 0 || entry.size < size
          || entry.size > 2 * size) {
        continue;
      }
      boolean isPreferred = preferred.contains(entry.key.id());
      if (best == null || isPreferred && !bestPreferred
          || isPreferred == bestPreferred && entry.size < best.size) {
        best = entry;
        bestPreferred = isPreferred;
      }
    }
    return best;
  }

  /**
   * Forgets an in-memory entry and moves its file to {@code target} (same file system) for a
   * writer to overwrite. A file with another hard link is not handed over: an executor links a
   * stored object as its result when it returns equal bytes (so the bytes outlive a release
   * that races the agent's adoption), and overwriting that inode would change its result. Such
   * a file is only unlinked here, and this throws.
   */
  void detach(Entry entry, Path target) throws IOException {
    Files.move(layout.memoryPath(entry.key), target, StandardCopyOption.ATOMIC_MOVE);
    forget(entry.key);
    memoryBytes -= entry.size;
    // Checked after the rename: nobody can add a link through the old name any more.
    Object links = Files.getAttribute(target, "unix:nlink");
    if (!(links instanceof Integer count) || count != 1) {
      Files2.deleteQuietly(target);
      throw new IOException(entry.key + " has other links (" + links + "): not reused");
    }
  }

  /** Counts a released object's file handed to a writer to reuse. */
  void recycled() {
    recycledFiles++;
  }

  void clear() {
    entries.clear();
    byNamespace.clear();
    smallBytes = 0;
  }

  StoreStats stats() {
    int referenced = 0;
    int spilled = 0;
    for (Entry entry : entries.values()) {
      referenced += entry.references > 0 ? 1 : 0;
      spilled += entry.spilled ? 1 : 0;
    }
    return new StoreStats(entries.size(), referenced, spilled, memoryBytes, spilledBytes,
        capacity, recycledFiles);
  }

  /**
   * Evicts unreferenced objects, then spills referenced ones, least recently used first, until
   * {@code needed} more bytes fit. Objects leased by running calls stay.
   */
  void makeRoom(long needed, ObjectKey forKey) {
    while (memoryBytes + needed > capacity) {
      Entry victim = leastRecentlyUsed(true);
      if (victim != null) {
        remove(victim);
        continue;
      }
      victim = leastRecentlyUsed(false);
      if (victim == null) {
        throw new StoreFullException("the object store cannot make room for " + forKey.id()
            + " (" + needed + " bytes): " + memoryBytes + " of " + capacity + " bytes are held"
            + " by running calls; retry when they end, or start the cluster with a larger"
            + " --store-capacity");
      }
      spill(victim, needed, forKey);
    }
  }

  /**
   * Evicts the namespace's least recently used unreferenced object in memory (none leased).
   *
   * @return false when it has none
   */
  boolean evictOne(String namespace) {
    Entry victim = null;
    for (Entry entry : inNamespace(namespace)) {
      if (!entry.spilled && entry.leases == 0 && entry.references == 0
          && (victim == null || entry.lastUse < victim.lastUse)) {
        victim = entry;
      }
    }
    if (victim == null) {
      return false;
    }
    remove(victim);
    return true;
  }

  private Entry leastRecentlyUsed(boolean unreferenced) {
    Entry best = null;
    for (Entry entry : entries.values()) {
      if (entry.spilled || entry.leases > 0 || (entry.references == 0) != unreferenced) {
        continue;
      }
      if (best == null || entry.lastUse < best.lastUse) {
        best = entry;
      }
    }
    return best;
  }

  private void spill(Entry victim, long needed, ObjectKey forKey) {
    if (layout.spillRoot() == null) {
      throw new StoreFullException("the object store is full: " + forKey.id() + " needs " + needed
          + " bytes, " + memoryBytes + " of " + capacity + " are held by referenced objects and"
          + " no spill folder is configured (--spill-dir)");
    }
    Path folder = layout.spillRoot().resolve(victim.key.namespace());
    Path temp = folder.resolve(StoreLayout.TEMP_PREFIX + UUID.randomUUID());
    try {
      Files2.ownerOnlyFolder(folder);
      Files.copy(layout.memoryPath(victim.key), temp, StandardCopyOption.COPY_ATTRIBUTES);
      Files2.publish(temp, layout.spillPath(victim.key));
    } catch (IOException e) {
      Files2.deleteQuietly(temp);
      throw new StoreFullException("the object store is full and spilling failed: " + forKey.id()
          + " needs " + needed + " bytes, " + memoryBytes + " of " + capacity + " are in use, and"
          + " writing " + victim.key.id() + " (" + victim.size + " bytes) to the spill folder "
          + layout.spillRoot() + " failed: " + e + ". Free disk space there or give another --spill-dir", e);
    }
    Files2.deleteQuietly(layout.memoryPath(victim.key));
    victim.spilled = true;
    memoryBytes -= victim.size;
    spilledBytes += victim.size;
  }

  /** Reads a spilled object back into memory when room can be made; else it stays on disk. */
  void unspill(Entry entry) {
    if (!entry.spilled || memoryBytes + entry.size > capacity && !canMakeRoom(entry)) {
      return;
    }
    Path temp = layout.tempPath(entry.key.namespace());
    try {
      makeRoom(entry.size, entry.key);
      Files.copy(layout.spillPath(entry.key), temp);
      folders.prepare(entry.key.namespace(), temp);
      Files2.publish(temp, layout.memoryPath(entry.key));
    } catch (IOException | StoreFullException e) {
      Files2.deleteQuietly(temp);
      return; // served from the spill folder
    }
    Files2.deleteQuietly(layout.spillPath(entry.key));
    entry.spilled = false;
    spilledBytes -= entry.size;
    memoryBytes += entry.size;
  }

  private boolean canMakeRoom(Entry entry) {
    long movable = 0;
    for (Entry other : entries.values()) {
      if (!other.spilled && other.leases == 0 && other != entry) {
        movable += other.size;
      }
    }
    return memoryBytes - movable + entry.size <= capacity;
  }
}
