package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectInfo;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.bridge.StoreFullException;
import dev.bulletin.bridge.StoreArena;
import dev.bulletin.bridge.StoreOptions;
import dev.bulletin.bridge.StoreStats;
import dev.bulletin.bridge.UserFolder;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * One file per object: {@code root/namespace/id} in memory (/dev/shm), or
 * {@code spillRoot/namespace/id} once spilled. Files appear by atomic rename from a dot-prefixed
 * temporary name, so a reader never sees a partial object. The table of objects is guarded by
 * {@code this}; uploads write their bytes outside the lock into room reserved up front.
 */
public final class FileObjectStore implements ObjectStore {

  /** Marks a folder as a store, and names the process that owns it ({@link StoreOwner}). */
  static final String MARKER = ".bulletin-store";
  /** Uploads smaller than this write fresh pages: the /proc scan would cost more. */
  static final long UPLOAD_REUSE_MIN_BYTES = 64L << 20;

  private final Path root;
  private final Path spillRoot;
  private final long capacity;
  private final StoreLayout layout;
  private final StoreTable table;
  private final NamespaceFolders folders;
  /** Pre-faulted files for first writes; null until {@link #useArena}. */
  private volatile StoreArena arena;
  /** The budget {@link #useArena} was given, kept where no host arena can serve the writers. */
  private volatile long arenaBudget;

  public FileObjectStore(StoreOptions options) {
    this(options, false);
  }

  /**
   * @param keepObjects keep the objects an earlier run left (unreferenced, until the caller
   *     retains them or {@link #dropUnreferencedObjects} deletes them); else start empty
   */
  public FileObjectStore(StoreOptions options, boolean keepObjects) {
    this.root = options.folder();
    this.spillRoot = options.spillFolder();
    this.capacity = options.capacityBytes();
    this.layout = new StoreLayout(root, spillRoot);
    this.folders = new NamespaceFolders(root, options.userShareBytes());
    this.table = new StoreTable(layout, capacity, folders);
    try {
      prepare(root, keepObjects);
      if (spillRoot != null) {
        prepare(spillRoot, keepObjects);
      }
      if (keepObjects) {
        KeptObjects.scan(root, table::add);
        if (spillRoot != null) {
          KeptObjects.scan(spillRoot, (key, size) -> {
            if (table.get(key) == null) {
              table.addSpilled(key, size);
            }
          });
        }
      }
    } catch (IOException e) {
      throw new ObjectStoreException("cannot create object store folder " + root + ": " + e, e);
    }
  }

  /** A fresh folder, or one this store left behind (emptied unless its objects are kept). */
  private static void prepare(Path folder, boolean keep) throws IOException {
    if (!Files2.isEmptyOrMissing(folder) && !Files.exists(folder.resolve(MARKER))) {
      throw new ObjectStoreException("object store folder " + folder + " is not empty and was not"
          + " made by bulletin; give an empty or new folder (--store-dir / --spill-dir)");
    }
    if (!keep) {
      ShareMounts.unmountUnder(folder); // namespaces' file systems an earlier run left
      UserFolder.deleteTree(folder);
    }
    Files2.ownerOnlyFolder(folder);
    StoreOwner.mark(folder.resolve(MARKER));
  }

  /** Keeps a pre-faulted arena of {@code budgetBytes} for this store's writers (0: none). */
  public void useArena(long budgetBytes, MemoryPressure pressure) {
    arenaBudget = budgetBytes;
    // A namespace of its own file system cannot take a file of the arena's by rename: each
    // client then keeps spares of its own, inside its share (writerSpareBytes).
    if (budgetBytes > 0 && arena == null && !folders.shared()) {
      arena = new FileStoreArena(root, budgetBytes, pressure);
    }
  }

  @Override
  public StoreArena arena() {
    return arena;
  }

  @Override
  public long writerSpareBytes(String namespace) {
    StoreArena pool = arena;
    if (pool != null) {
      return pool.stats().budgetBytes();
    }
    // What the host arena would offer one client (half its budget), and at most a quarter of
    // the share the spares count against: the rest stays for the user's objects.
    return folders.shared() ? Math.min(arenaBudget / 2, folders.shareBytes() / 4) : 0;
  }

  @Override
  public StoreArena.Handout handOutSpare(String namespace, long size, String stagedName) {
    StoreArena pool = arena;
    if (pool == null) {
      return StoreArena.Handout.REFUSED;
    }
    checkStagedName(stagedName, size);
    return pool.handOut(folders.staging(namespace), namespace, size, stagedName);
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
    return folders.objects(namespace);
  }

  @Override
  public Path stagingFolderOf(String namespace) {
    return folders.staging(namespace).path();
  }

  @Override
  public void giveFolderTo(String namespace, int uid, int gid) {
    folders.giveTo(namespace, uid, gid);
  }

  private Path memoryPath(ObjectKey key) {
    return layout.memoryPath(key);
  }

  private Path pathOf(StoreTable.Entry entry) {
    return layout.pathOf(entry);
  }

  Path tempPath(String namespace) {
    folderOf(namespace);
    return layout.tempPath(namespace);
  }

  // ---- writing -----------------------------------------------------------------------------

  @Override
  public synchronized ObjectKey put(ObjectKey key, ByteBuffer bytes) {
    StoreTable.Entry existing = table.get(key);
    if (existing != null) {
      existing.references++;
      touch(existing);
      return key;
    }
    long size = bytes.remaining();
    checkFits(key, size);
    makeRoom(size, key);
    checkShare(key, size);
    Path temp = tempPath(key.namespace());
    try {
      Files2.writeFully(temp, bytes);
      folders.prepare(key.namespace(), temp);
      Files2.publish(temp, memoryPath(key));
    } catch (IOException e) {
      Files2.deleteQuietly(temp);
      throw new ObjectStoreException("cannot write object " + key + ": " + e, e);
    }
    StoreTable.Entry added = add(key, size);
    added.references = 1;
    if (table.roomForSmall(size)) {
      byte[] copy = new byte[(int) size];
      bytes.duplicate().get(copy);
      table.keepSmall(added, copy);
    }
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
      checkShare(key, size); // before the first byte: a full share fails the upload at once
      table.reserve(size); // until commit or close
    }
    try {
      return new FileUpload(this, key, size, tempPath(key.namespace()));
    } catch (RuntimeException e) {
      unreserve(size);
      throw e;
    }
  }

  /**
   * The file an upload writes, opened on its first byte (on the thread that moves the bytes,
   * not the one that began it): a released object's file when one fits and no process maps it
   * any more (pages already allocated take the bytes at copy speed, fresh shared memory at
   * page-fault speed), else a new one.
   */
  UploadFile openUploadFile(String namespace, long size, Path temp) throws IOException {
    // READ too: a receiver may map it read-write.
    if (size >= UPLOAD_REUSE_MIN_BYTES && reuse(namespace, size, temp)) {
      FileChannel file = FileChannel.open(temp, StandardOpenOption.READ,
          StandardOpenOption.WRITE);
      file.truncate(size);
      return new UploadFile(file, true);
    }
    return new UploadFile(FileChannel.open(temp, StandardOpenOption.CREATE_NEW,
        StandardOpenOption.READ, StandardOpenOption.WRITE), false);
  }

  /** An upload's open file; {@code reused}: a released object's, its pages allocated. */
  record UploadFile(FileChannel channel, boolean reused) {}

  /** Moves a released object's file to {@code temp} if one fits and nobody maps it. */
  private boolean reuse(String namespace, long size, Path temp) {
    synchronized (this) {
      StoreTable.Entry victim = table.recyclable(namespace, size, Set.of());
      if (victim == null) {
        return false;
      }
      try {
        table.detach(victim, temp);
      } catch (IOException e) {
        return false;
      }
    }
    // Renamed, nobody can open it any more; who mapped it before still does.
    if (ProcMaps.mappedAnywhere(temp)) {
      Files2.deleteQuietly(temp);
      return false;
    }
    synchronized (this) {
      table.recycled();
    }
    return true;
  }

  synchronized void unreserve(long size) {
    table.unreserve(size);
  }

  /** Publishes a finished upload; its reserved room becomes the object's (or is given back). */
  synchronized ObjectKey commitUpload(ObjectKey key, long size, Path temp) {
    StoreTable.Entry existing = table.get(key);
    if (existing != null) {
      table.unreserve(size);
      Files2.deleteQuietly(temp);
      existing.references++;
      touch(existing);
      return key;
    }
    try {
      folders.prepare(key.namespace(), temp);
      Files2.publish(temp, memoryPath(key));
    } catch (IOException e) {
      table.unreserve(size);
      Files2.deleteQuietly(temp);
      throw new ObjectStoreException("cannot publish object " + key + ": " + e, e);
    }
    table.unreserve(size); // add() counts it again as an object
    add(key, size).references = 1;
    return key;
  }

  @Override
  public synchronized ObjectKey adopt(ObjectKey key, Path staged) {
    Path folder = stagingFolderOf(key.namespace());
    if (!folder.equals(staged.getParent())
        || !staged.getFileName().toString().startsWith(".")) {
      throw new ObjectStoreException("a staged object must be a dot-prefixed file in " + folder
          + ", got " + staged);
    }
    String name = staged.getFileName().toString();
    StoreTable.Entry existing = table.get(key);
    if (existing != null) {
      // Equal bytes are already here (the writer may have seen them and written nothing).
      folders.staging(key.namespace()).delete(name);
      existing.references++;
      touch(existing);
      return key;
    }
    // Out of the writer's folder first: only there is what the name points to settled.
    Path temp = tempPath(key.namespace());
    long size = folders.take(key, name, temp);
    if (size > capacity) {
      Files2.deleteQuietly(temp);
      throw tooLarge(key, size);
    }
    try {
      makeRoom(size, key);
    } catch (StoreFullException e) {
      // The bytes already sit in memory: keep them, the next writer makes room.
    }
    try {
      Files2.publish(temp, memoryPath(key));
    } catch (IOException e) {
      Files2.deleteQuietly(temp);
      throw new ObjectStoreException("cannot publish object " + key + ": " + e, e);
    }
    add(key, size).references = 1;
    return key;
  }

  @Override
  public synchronized boolean stageRecycled(String namespace, long size,
      Collection<ObjectId> preferred, boolean onlyPreferred, String stagedName) {
    checkStagedName(stagedName, size);
    StoreTable.Entry victim = table.recyclable(namespace, size, new HashSet<>(preferred));
    if (victim == null || onlyPreferred && !preferred.contains(victim.key.id())) {
      return false;
    }
    Path temp = tempPath(namespace);
    try {
      table.detach(victim, temp);
      folders.staging(namespace).handIn(temp, stagedName);
    } catch (IOException e) {
      Files2.deleteQuietly(temp);
      return false; // the writer takes a fresh file
    }
    table.recycled();
    return true;
  }

  private static void checkStagedName(String stagedName, long size) {
    if (size < 0 || !stagedName.startsWith(".") || stagedName.contains("/")
        || stagedName.equals(".") || stagedName.equals("..")) {
      throw new ObjectStoreException("a staged name is a dot-prefixed file name and a size is"
          + " >= 0; got " + stagedName + " and " + size);
    }
  }

  private StoreTable.Entry add(ObjectKey key, long size) {
    return table.add(key, size);
  }

  private void touch(StoreTable.Entry entry) {
    table.touch(entry);
  }

  private void makeRoom(long needed, ObjectKey forKey) {
    table.makeRoom(needed, forKey);
  }

  /** Room in the namespace's own share, made from its own unreferenced objects only. */
  private void checkShare(ObjectKey key, long size) {
    folders.checkRoom(key, size, () -> table.evictOne(key.namespace()));
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

  // ---- reading -----------------------------------------------------------------------------

  private StoreTable.Entry entry(ObjectKey key) {
    StoreTable.Entry entry = table.get(key);
    if (entry == null) {
      throw new ObjectStoreException("object " + key + " is not in the store");
    }
    return entry;
  }

  @Override
  public synchronized boolean contains(ObjectKey key) {
    return table.get(key) != null;
  }

  @Override
  public synchronized boolean retainIfPresent(ObjectKey key) {
    StoreTable.Entry entry = table.get(key);
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
    StoreTable.Entry entry;
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
    StoreTable.Entry entry = entry(key);
    touch(entry);
    try (FileChannel in = FileChannel.open(pathOf(entry), StandardOpenOption.READ)) {
      return in.map(FileChannel.MapMode.READ_ONLY, 0, in.size());
    } catch (IOException e) {
      throw new ObjectStoreException("cannot read object " + key + ": " + e, e);
    }
  }

  @Override
  public synchronized byte[] readSmall(ObjectKey key) {
    StoreTable.Entry entry = entry(key);
    touch(entry);
    if (entry.bytes != null) {
      return entry.bytes.clone();
    }
    try {
      byte[] bytes = Files.readAllBytes(pathOf(entry));
      if (table.roomForSmall(bytes.length)) {
        table.keepSmall(entry, bytes.clone());
      }
      return bytes;
    } catch (NoSuchFileException e) {
      throw new ObjectStoreException("object " + key + " is not in the store");
    } catch (IOException e) {
      throw new ObjectStoreException("cannot read object " + key + ": " + e, e);
    }
  }

  @Override
  public synchronized Lease lease(Collection<ObjectKey> keys) {
    List<StoreTable.Entry> leased = new ArrayList<>();
    for (ObjectKey key : new java.util.LinkedHashSet<>(keys)) {
      leased.add(entry(key)); // all present before any is held
    }
    Map<ObjectKey, Path> paths = new LinkedHashMap<>();
    for (StoreTable.Entry entry : leased) {
      entry.leases++;
      touch(entry);
    }
    for (StoreTable.Entry entry : leased) {
      table.unspill(entry);
      paths.put(entry.key, pathOf(entry));
    }
    return new StoreLease(this, paths);
  }

  synchronized void endLease(Collection<ObjectKey> keys) {
    for (ObjectKey key : keys) {
      StoreTable.Entry entry = table.get(key);
      if (entry != null && entry.leases > 0) {
        entry.leases--;
      }
    }
  }

  // ---- references --------------------------------------------------------------------------

  @Override
  public synchronized void retain(ObjectKey key) {
    StoreTable.Entry entry = entry(key);
    entry.references++;
    touch(entry);
  }

  @Override
  public synchronized void release(ObjectKey key) {
    StoreTable.Entry entry = table.get(key);
    if (entry == null || entry.references == 0) {
      return;
    }
    entry.references--;
    if (entry.references == 0 && entry.spilled && entry.leases == 0) {
      table.remove(entry); // disk is not a cache: a spilled object nobody holds goes at once
    }
  }

  @Override
  public synchronized void dropUnreferenced(String namespace, String stagedPrefix) {
    List<StoreTable.Entry> unused = table.inNamespace(namespace).stream()
        .filter(entry -> entry.references == 0 && entry.leases == 0).toList();
    unused.forEach(table::remove);
    if (stagedPrefix != null && !stagedPrefix.isEmpty()) {
      deleteStaged(namespace, stagedPrefix);
    }
  }

  @Override
  public void deleteStaged(String namespace, String prefix) {
    if (prefix == null || prefix.isEmpty()) {
      throw new IllegalArgumentException("deleteStaged needs a prefix: it would empty the folder");
    }
    folders.staging(namespace).deleteEntries(prefix);
  }

  @Override
  public synchronized int dropUnreferencedObjects() {
    List<StoreTable.Entry> unused = table.all().stream()
        .filter(entry -> entry.references == 0 && entry.leases == 0).toList();
    unused.forEach(table::remove);
    return unused.size();
  }

  @Override
  public synchronized int objectCount() {
    return table.size();
  }

  @Override
  public synchronized StoreStats stats() {
    return table.stats();
  }

  @Override
  public synchronized void close() {
    if (arena != null) {
      arena.close();
    }
    table.clear();
    if (folders.shared()) {
      ShareMounts.unmountUnder(root);
    }
    UserFolder.deleteTree(root); // users' staging folders inside: by descriptors only
    UserFolder.deleteTree(spillRoot);
  }
}
