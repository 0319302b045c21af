package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/**
 * One file per object in a folder (on /dev/shm, so files live in memory). Objects appear by
 * atomic rename from a temporary name, so a reader never sees a partial object. Executors write
 * their results the same way and the agent then {@link #retain}s them.
 */
public final class FileObjectStore implements ObjectStore {

  static final String TEMP_PREFIX = ".tmp-";

  private final Path root;
  private final ConcurrentHashMap<ObjectId, Integer> references = new ConcurrentHashMap<>();

  public FileObjectStore(Path root) {
    this.root = root;
    try {
      Files.createDirectories(root);
      // Objects hold users' code and data: only the runtime's user may read them.
      Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx------"));
    } catch (IOException e) {
      throw new ObjectStoreException("cannot create object store folder " + root + ": " + e, e);
    }
  }

  @Override
  public Path root() {
    return root;
  }

  @Override
  public ObjectId put(ByteBuffer bytes) {
    return store(ObjectId.of(bytes), bytes);
  }

  @Override
  public ObjectId put(ObjectId expected, ByteBuffer bytes) {
    ObjectId actual = ObjectId.of(bytes);
    if (!actual.equals(expected)) {
      throw new ObjectStoreException(
          "object announced as " + expected + " hashes to " + actual + ": corrupted in transit");
    }
    return store(expected, bytes);
  }

  private ObjectId store(ObjectId id, ByteBuffer bytes) {
    references.compute(id, (key, count) -> {
      if (count == null && !Files.exists(pathOf(key))) {
        Path temp = tempPath();
        try (FileChannel out = FileChannel.open(temp, StandardOpenOption.CREATE_NEW,
            StandardOpenOption.WRITE)) {
          ByteBuffer source = bytes.duplicate();
          while (source.hasRemaining()) {
            out.write(source);
          }
        } catch (IOException e) {
          deleteQuietly(temp);
          throw new ObjectStoreException("cannot write object " + key + ": " + e, e);
        }
        publish(temp, key);
      }
      return count == null ? 1 : count + 1;
    });
    return id;
  }

  @Override
  public Upload beginUpload(ObjectId expected, long size) {
    if (size < 0) {
      throw new ObjectStoreException("object size must be >= 0, got " + size);
    }
    return new FileUpload(expected, size);
  }

  @Override
  public boolean contains(ObjectId id) {
    return Files.exists(pathOf(id));
  }

  @Override
  public long size(ObjectId id) {
    try {
      return Files.size(pathOf(id));
    } catch (NoSuchFileException e) {
      throw missing(id);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public ByteBuffer read(ObjectId id) {
    try (FileChannel in = FileChannel.open(pathOf(id), StandardOpenOption.READ)) {
      return in.map(FileChannel.MapMode.READ_ONLY, 0, in.size());
    } catch (NoSuchFileException e) {
      throw missing(id);
    } catch (IOException e) {
      throw new ObjectStoreException("cannot read object " + id + ": " + e, e);
    }
  }

  @Override
  public byte[] readSmall(ObjectId id) {
    try {
      return Files.readAllBytes(pathOf(id));
    } catch (NoSuchFileException e) {
      throw missing(id);
    } catch (IOException e) {
      throw new ObjectStoreException("cannot read object " + id + ": " + e, e);
    }
  }

  @Override
  public void retain(ObjectId id) {
    references.compute(id, (key, count) -> {
      if (count == null && !Files.exists(pathOf(key))) {
        throw missing(key);
      }
      return count == null ? 1 : count + 1;
    });
  }

  @Override
  public void release(ObjectId id) {
    references.computeIfPresent(id, (key, count) -> {
      if (count > 1) {
        return count - 1;
      }
      deleteQuietly(pathOf(key));
      return null;
    });
  }

  @Override
  public int objectCount() {
    try (Stream<Path> files = Files.list(root)) {
      return (int) files.filter(p -> !p.getFileName().toString().startsWith(TEMP_PREFIX)).count();
    } catch (IOException e) {
      return 0;
    }
  }

  @Override
  public void close() {
    references.clear();
    if (!Files.exists(root)) {
      return;
    }
    try (Stream<Path> files = Files.walk(root)) {
      files.sorted(Comparator.reverseOrder()).forEach(FileObjectStore::deleteQuietly);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private Path pathOf(ObjectId id) {
    return root.resolve(id.hex());
  }

  private Path tempPath() {
    return root.resolve(TEMP_PREFIX + UUID.randomUUID());
  }

  private void publish(Path temp, ObjectId id) {
    try {
      Files.move(temp, pathOf(id), StandardCopyOption.ATOMIC_MOVE);
    } catch (FileAlreadyExistsException e) {
      deleteQuietly(temp); // same id, same bytes: someone else won the race
    } catch (AtomicMoveNotSupportedException e) {
      throw new ObjectStoreException("object store folder " + root + " must support atomic rename", e);
    } catch (IOException e) {
      deleteQuietly(temp);
      throw new ObjectStoreException("cannot publish object " + id + ": " + e, e);
    }
  }

  private static ObjectStoreException missing(ObjectId id) {
    return new ObjectStoreException("object " + id + " is not in the store");
  }

  private static void deleteQuietly(Path path) {
    try {
      Files.deleteIfExists(path);
    } catch (IOException ignored) {
      // A leftover file is reclaimed when the store closes.
    }
  }

  private final class FileUpload implements Upload {
    private final ObjectId expected;
    private final long size;
    private final Path temp = tempPath();
    private final ObjectId.Hasher hasher = new ObjectId.Hasher();
    private final FileChannel out;
    private long written;
    private boolean finished;

    FileUpload(ObjectId expected, long size) {
      this.expected = expected;
      this.size = size;
      try {
        this.out = FileChannel.open(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
      } catch (IOException e) {
        throw new ObjectStoreException("cannot start upload of " + expected + ": " + e, e);
      }
    }

    @Override
    public void write(ByteBuffer chunk) {
      if (written + chunk.remaining() > size) {
        throw new ObjectStoreException("upload of " + expected + " sent more than the announced "
            + size + " bytes");
      }
      hasher.update(chunk);
      try {
        ByteBuffer source = chunk.duplicate();
        while (source.hasRemaining()) {
          written += out.write(source);
        }
      } catch (IOException e) {
        throw new ObjectStoreException("cannot write upload of " + expected + ": " + e, e);
      }
    }

    @Override
    public ObjectId commit() {
      closeChannel();
      if (written != size) {
        throw new ObjectStoreException("upload of " + expected + " ended after " + written
            + " of " + size + " bytes");
      }
      ObjectId actual = hasher.finish();
      if (!actual.equals(expected)) {
        throw new ObjectStoreException("upload announced as " + expected + " hashes to " + actual
            + ": corrupted in transit");
      }
      references.compute(expected, (key, count) -> {
        if (count == null) {
          publish(temp, key);
        }
        return count == null ? 1 : count + 1;
      });
      finished = true;
      deleteQuietly(temp);
      return expected;
    }

    @Override
    public void close() {
      closeChannel();
      if (!finished) {
        deleteQuietly(temp);
      }
    }

    private void closeChannel() {
      try {
        out.close();
      } catch (IOException ignored) {
        // Nothing to flush on a failed upload.
      }
    }
  }
}
