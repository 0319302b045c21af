package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.ObjectInfo;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.bridge.StoreFullException;
import dev.bulletin.bridge.StoreOptions;
import dev.bulletin.bridge.StoreStats;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Stream;

/**
 * One file per object: {@code root/namespace/id} in memory (/dev/shm), or
 * {@code spillRoot/namespace/id} once spilled. Files appear by atomic rename from a dot-prefixed
 * temporary name, so a reader never sees a partial object. The table of objects is guarded by
 * {@code this}; uploads write their bytes outside the lock into room reserved up front.
 */
public final class FileObjectStore implements ObjectStore {

  static final String TEMP_PREFIX = ".tmp-";
  private static final String MARKER = ".bulletin-store";

  private final Path root;
  private final Path spillRoot;
  private final long capacity;
  private final Map<ObjectKey, Entry> entries = new HashMap<>();
  /** Bytes of in-memory objects plus room reserved by uploads in progress. */
  private long memoryBytes;
  private long spilledBytes;
  private long clock;

  private static final class Entry {
    final ObjectKey key;
    final long size;
    int references;
    int leases;
    boolean spilled;
    long lastUse;
    ArrowMetadata.Parsed metadata;

    Entry(ObjectKey key, long size) {
      this.key = key;
      this.size = size;
    }
  }

  public FileObjectStore(StoreOptions options) {
    this.root = options.folder();
    this.spillRoot = options.spillFolder();
    this.capacity = options.capacityBytes();
    try {
      prepare(root);
      if (spillRoot != null) {
        prepare(spillRoot);
      }
    } catch (IOException e) {
      throw new ObjectStoreException("cannot create object store folder " + root + ": " + e, e);
    }
  }

  /** A fresh folder, or one this store left behind (its objects are stale: start empty). */
  private static void prepare(Path folder) throws IOException {
    if (!Files2.isEmptyOrMissing(folder) && !Files.exists(folder.resolve(MARKER))) {
      throw new ObjectStoreException("object store folder " + folder + " is not empty and was not"
          + " made by bulletin; give an empty or new folder (--store-dir / --spill-dir)");
    }
    Files2.deleteTree(folder);
    Files2.ownerOnlyFolder(folder);
    Files.createFile(folder.resolve(MARKER));
  }

  @Override
  public Path root() {
    return root;
  }

  @Override
  public Path spillRoot() {
    return spillRoot;
  }

  @Override
  public long capacityBytes() {
    return capacity;
  }

  @Override
  public Path folderOf(String namespace) {
    Path folder = root.resolve(new ObjectKey(namespace, zeroId()).namespace());
    if (!Files.isDirectory(folder)) {
      try {
        Files2.ownerOnlyFolder(folder);
      } catch (IOException e) {
        throw new ObjectStoreException("cannot create object folder " + folder + ": " + e, e);
      }
    }
    return folder;
  }

  private static dev.bulletin.bridge.ObjectId zeroId() {
    return dev.bulletin.bridge.ObjectId.parse("0".repeat(32));
  }

  private Path memoryPath(ObjectKey key) {
    return root.resolve(key.namespace()).resolve(key.id().hex());
  }

  private Path spillPath(ObjectKey key) {
    return spillRoot.resolve(key.namespace()).resolve(key.id().hex());
  }

  private Path pathOf(Entry entry) {
    return entry.spilled ? spillPath(entry.key) : memoryPath(entry.key);
  }

  Path tempPath(String namespace) {
    return folderOf(namespace).resolve(TEMP_PREFIX + UUID.randomUUID());
  }

  // ---- writing -----------------------------------------------------------------------------

  @Override
  public synchronized ObjectKey put(ObjectKey key, ByteBuffer bytes) {
    Entry existing = entries.get(key);
    if (existing != null) {
      existing.references++;
      touch(existing);
      return key;
    }
    long size = bytes.remaining();
    checkFits(key, size);
    makeRoom(size, key);
    Path temp = tempPath(key.namespace());
    try {
      Files2.writeFully(temp, bytes);
      Files2.publish(temp, memoryPath(key));
    } catch (IOException e) {
      Files2.deleteQuietly(temp);
      throw new ObjectStoreException("cannot write object " + key + ": " + e, e);
    }
    add(key, size).references = 1;
    return key;
  }

  @Override
  public Upload beginUpload(ObjectKey key, long size) {
    if (size < 0) {
      throw new ObjectStoreException("object size must be >= 0, got " + size);
    }
    checkFits(key, size);
    synchronized (this) {
      makeRoom(size, key);
      memoryBytes += size; // reserved until commit or close
    }
    try {
      return new FileUpload(this, key, size, tempPath(key.namespace()));
    } catch (RuntimeException e) {
      unreserve(size);
      throw e;
    }
  }

  synchronized void unreserve(long size) {
    memoryBytes -= size;
  }

  /** Publishes a finished upload; its reserved room becomes the object's (or is given back). */
  synchronized ObjectKey commitUpload(ObjectKey key, long size, Path temp) {
    Entry existing = entries.get(key);
    if (existing != null) {
      memoryBytes -= size;
      Files2.deleteQuietly(temp);
      existing.references++;
      touch(existing);
      return key;
    }
    try {
      Files2.publish(temp, memoryPath(key));
    } catch (IOException e) {
      memoryBytes -= size;
      Files2.deleteQuietly(temp);
      throw new ObjectStoreException("cannot publish object " + key + ": " + e, e);
    }
    memoryBytes -= size; // add() counts it again as an object
    add(key, size).references = 1;
    return key;
  }

  @Override
  public synchronized ObjectKey adopt(ObjectKey key, Path staged) {
    Path folder = folderOf(key.namespace());
    if (!folder.equals(staged.getParent())
        || !staged.getFileName().toString().startsWith(".")) {
      throw new ObjectStoreException("a staged object must be a dot-prefixed file in " + folder
          + ", got " + staged);
    }
    long size;
    try {
      size = Files.size(staged);
    } catch (IOException e) {
      throw new ObjectStoreException("staged object " + staged + " for " + key
          + " cannot be read: " + e, e);
    }
    Entry existing = entries.get(key);
    if (existing != null) {
      Files2.deleteQuietly(staged);
      existing.references++;
      touch(existing);
      return key;
    }
    if (size > capacity) {
      Files2.deleteQuietly(staged);
      throw tooLarge(key, size);
    }
    try {
      makeRoom(size, key);
    } catch (StoreFullException e) {
      // The bytes already sit in memory: keep them, the next writer makes room.
    }
    try {
      Files2.publish(staged, memoryPath(key));
    } catch (IOException e) {
      Files2.deleteQuietly(staged);
      throw new ObjectStoreException("cannot publish object " + key + ": " + e, e);
    }
    add(key, size).references = 1;
    return key;
  }

  private Entry add(ObjectKey key, long size) {
    Entry entry = new Entry(key, size);
    memoryBytes += size;
    touch(entry);
    entries.put(key, entry);
    return entry;
  }

  private void touch(Entry entry) {
    entry.lastUse = ++clock;
  }

  private void checkFits(ObjectKey key, long size) {
    if (size > capacity) {
      throw tooLarge(key, size);
    }
  }

  private StoreFullException tooLarge(ObjectKey key, long size) {
    return new StoreFullException("object " + key.id() + " is " + size + " bytes, larger than the"
        + " object store's capacity of " + capacity + " bytes; pass smaller pieces, or start the"
        + " cluster with a larger --store-capacity");
  }

  // ---- making room -------------------------------------------------------------------------

  /**
   * Evicts unreferenced objects, then spills referenced ones, least recently used first, until
   * {@code needed} more bytes fit. Objects leased by running calls stay.
   */
  private void makeRoom(long needed, ObjectKey forKey) {
    while (memoryBytes + needed > capacity) {
      Entry victim = leastRecentlyUsed(true);
      if (victim != null) {
        Files2.deleteQuietly(memoryPath(victim.key));
        entries.remove(victim.key);
        memoryBytes -= victim.size;
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
    if (spillRoot == null) {
      throw new StoreFullException("the object store is full: " + forKey.id() + " needs " + needed
          + " bytes, " + memoryBytes + " of " + capacity + " are held by referenced objects and"
          + " no spill folder is configured (--spill-dir)");
    }
    Path folder = spillRoot.resolve(victim.key.namespace());
    Path temp = folder.resolve(TEMP_PREFIX + UUID.randomUUID());
    try {
      Files2.ownerOnlyFolder(folder);
      Files.copy(memoryPath(victim.key), temp, StandardCopyOption.COPY_ATTRIBUTES);
      Files2.publish(temp, spillPath(victim.key));
    } catch (IOException e) {
      Files2.deleteQuietly(temp);
      throw new StoreFullException("the object store is full and spilling failed: " + forKey.id()
          + " needs " + needed + " bytes, " + memoryBytes + " of " + capacity + " are in use, and"
          + " writing " + victim.key.id() + " (" + victim.size + " bytes) to the spill folder "
          + spillRoot + " failed: " + e + ". Free disk space there or give another --spill-dir", e);
    }
    Files2.deleteQuietly(memoryPath(victim.key));
    victim.spilled = true;
    memoryBytes -= victim.size;
    spilledBytes += victim.size;
  }

  /** Reads a spilled object back into memory when room can be made; else it stays on disk. */
  private void unspill(Entry entry) {
    if (!entry.spilled || memoryBytes + entry.size > capacity && !canMakeRoom(entry)) {
      return;
    }
    Path temp = tempPath(entry.key.namespace());
    try {
      makeRoom(entry.size, entry.key);
      Files.copy(spillPath(entry.key), temp);
      Files2.publish(temp, memoryPath(entry.key));
    } catch (IOException | StoreFullException e) {
      Files2.deleteQuietly(temp);
      return; // served from the spill folder
    }
    Files2.deleteQuietly(spillPath(entry.key));
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

  // ---- reading -----------------------------------------------------------------------------

  private Entry entry(ObjectKey key) {
    Entry entry = entries.get(key);
    if (entry == null) {
      throw new ObjectStoreException("object " + key + " is not in the store");
    }
    return entry;
  }

  @Override
  public synchronized boolean contains(ObjectKey key) {
    return entries.containsKey(key);
  }

  @Override
  public synchronized boolean retainIfPresent(ObjectKey key) {
    Entry entry = entries.get(key);
    if (entry == null) {
      return false;
    }
    entry.references++;
    touch(entry);
    return true;
  }

  @Override
  public synchronized long size(ObjectKey key) {
    return entry(key).size;
  }

  @Override
  public ObjectInfo info(ObjectKey key) {
    Entry entry;
    Path path;
    synchronized (this) {
      entry = entry(key);
      path = pathOf(entry);
    }
    ArrowMetadata.Parsed metadata = entry.metadata;
    if (metadata == null) {
      metadata = ArrowMetadata.read(path);
      synchronized (this) {
        entry.metadata = metadata;
      }
    }
    synchronized (this) {
      return new ObjectInfo(key, entry.size, metadata.kind(), metadata.format(), metadata.schema(),
          entry.references, entry.spilled);
    }
  }

  @Override
  public synchronized ByteBuffer read(ObjectKey key) {
    Entry entry = entry(key);
    touch(entry);
    try (FileChannel in = FileChannel.open(pathOf(entry), StandardOpenOption.READ)) {
      return in.map(FileChannel.MapMode.READ_ONLY, 0, in.size());
    } catch (IOException e) {
      throw new ObjectStoreException("cannot read object " + key + ": " + e, e);
    }
  }

  @Override
  public synchronized byte[] readSmall(ObjectKey key) {
    Entry entry = entry(key);
    touch(entry);
    try {
      return Files.readAllBytes(pathOf(entry));
    } catch (NoSuchFileException e) {
      throw new ObjectStoreException("object " + key + " is not in the store");
    } catch (IOException e) {
      throw new ObjectStoreException("cannot read object " + key + ": " + e, e);
    }
  }

  @Override
  public synchronized Lease lease(Collection<ObjectKey> keys) {
    List<Entry> leased = new ArrayList<>();
    for (ObjectKey key : new java.util.LinkedHashSet<>(keys)) {
      leased.add(entry(key)); // all present before any is held
    }
    Map<ObjectKey, Path> paths = new LinkedHashMap<>();
    for (Entry entry : leased) {
      entry.leases++;
      touch(entry);
    }
    for (Entry entry : leased) {
      unspill(entry);
      paths.put(entry.key, pathOf(entry));
    }
    return new StoreLease(this, paths);
  }

  synchronized void endLease(Collection<ObjectKey> keys) {
    for (ObjectKey key : keys) {
      Entry entry = entries.get(key);
      if (entry != null && entry.leases > 0) {
        entry.leases--;
      }
    }
  }

  // ---- references --------------------------------------------------------------------------

  @Override
  public synchronized void retain(ObjectKey key) {
    Entry entry = entry(key);
    entry.references++;
    touch(entry);
  }

  @Override
  public synchronized void release(ObjectKey key) {
    Entry entry = entries.get(key);
    if (entry == null || entry.references == 0) {
      return;
    }
    entry.references--;
    if (entry.references == 0 && entry.spilled && entry.leases == 0) {
      // Disk is not a cache: a spilled object nobody holds goes at once.
      Files2.deleteQuietly(spillPath(key));
      spilledBytes -= entry.size;
      entries.remove(key);
    }
  }

  @Override
  public synchronized void dropUnreferenced(String namespace, String stagedPrefix) {
    entries.values().removeIf(entry -> {
      if (!entry.key.namespace().equals(namespace) || entry.references > 0 || entry.leases > 0) {
        return false;
      }
      Files2.deleteQuietly(pathOf(entry));
      if (entry.spilled) {
        spilledBytes -= entry.size;
      } else {
        memoryBytes -= entry.size;
      }
      return true;
    });
    if (stagedPrefix != null && !stagedPrefix.isEmpty()) {
      Path folder = root.resolve(namespace);
      if (Files.isDirectory(folder)) {
        try (Stream<Path> files = Files.list(folder)) {
          files.filter(p -> p.getFileName().toString().startsWith(stagedPrefix))
              .forEach(Files2::deleteQuietly);
        } catch (IOException ignored) {
          // Reclaimed when the store closes.
        }
      }
    }
  }

  @Override
  public synchronized int objectCount() {
    return entries.size();
  }

  @Override
  public synchronized StoreStats stats() {
    int referenced = 0;
    int spilled = 0;
    for (Entry entry : entries.values()) {
      referenced += entry.references > 0 ? 1 : 0;
      spilled += entry.spilled ? 1 : 0;
    }
    return new StoreStats(entries.size(), referenced, spilled, memoryBytes, spilledBytes,
        capacity);
  }

  @Override
  public synchronized void close() {
    entries.clear();
    Files2.deleteTree(root);
    Files2.deleteTree(spillRoot);
  }
}
