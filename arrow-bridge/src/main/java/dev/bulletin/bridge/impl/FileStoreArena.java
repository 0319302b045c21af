package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.bridge.StoreArena;
import dev.bulletin.bridge.UserFolder;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.Logger;

/**
 * The store's arena: files in {@code root/.arena} (0700, the store owner's only: no namespace may
 * start with a dot), filled with zeros by one background thread, so that their pages are
 * allocated and zeroed before any writer needs them. At start the pool is a ladder of
 * power-of-two sizes that fills the budget (a write takes the smallest file that fits, and
 * cutting a much larger one down costs time freeing its tail); each handout is made again, the
 * same size; a request larger than every file makes the next one that large. While the machine
 * is short of memory the pool is deleted and nothing is filled.
 */
public final class FileStoreArena implements StoreArena {
  static final String FOLDER = ".arena";
  static final long GRANULE = 2L << 20;
  private static final long MIN_FILE = 4L << 20;
  private static final long CHECK_MILLIS = 1000;
  /** Freeing this much at a writer's ftruncate costs about 35 ms on tmpfs. */
  private static final long LONG_TAIL = 256L << 20;
  private static final Logger LOG = Logger.getLogger(FileStoreArena.class.getName());

  private final Path folder;
  private final long budget;
  private final long longTail;
  private final MemoryPressure pressure;
  private final List<Pooled> pool = new ArrayList<>();
  /** Sizes to fill next, in order. */
  private final List<Long> plan;
  /** Files handed out and not yet used: counted against the budget until they are gone. */
  private final Map<Path, HandedOut> handedOut = new LinkedHashMap<>();
  private final Thread filler;
  private long filling;
  private long counter;
  private long handOuts;
  private long givenBack;
  private boolean closed;

  private record Pooled(Path path, long size) {}

  private record HandedOut(String namespace, long size) {}

  /**
   * @param storeRoot the store's memory folder; the pool lives in its {@code .arena} folder
   * @param budgetBytes pooled plus handed-out-and-unused bytes, at most
   */
  public FileStoreArena(Path storeRoot, long budgetBytes, MemoryPressure pressure) {
    this(storeRoot, budgetBytes, pressure, LONG_TAIL);
  }

  /** @param longTail a file whose tail beyond a write is longer than this is too long for it */
  FileStoreArena(Path storeRoot, long budgetBytes, MemoryPressure pressure, long longTail) {
    this.longTail = longTail;
    this.folder = storeRoot.resolve(FOLDER);
    this.budget = budgetBytes;
    this.pressure = pressure;
    this.plan = ladder(budgetBytes);
    dev.bulletin.bridge.UserFolder.deleteTree(folder); // an earlier run's pool: zeros, but not ours to count
    try {
      Files2.ownerOnlyFolder(folder);
    } catch (IOException e) {
      throw new ObjectStoreException("cannot create the store's arena folder " + folder + ": "
          + e, e);
    }
    filler = new Thread(this::fillLoop, "bulletin-store-arena");
    filler.setDaemon(true);
    filler.setPriority(Thread.MIN_PRIORITY);
    filler.start();
  }

  @Override
  public synchronized Handout handOut(UserFolder target, String namespace, long size,
      String stagedName) {
    forgetUsed();
    long held = handedOut.values().stream().filter(h -> h.namespace().equals(namespace))
        .mapToLong(HandedOut::size).sum();
    Pooled fit = pool.stream().filter(p -> p.size() >= size)
        .min(Comparator.comparingLong(Pooled::size)).orElse(null);
    long wanted = roundUp(size);
    if (fit == null || tooLong(fit.size(), wanted)) {
      // Made only for a writer that may take it, and only where the files other writers hold
      // leave room: a "later" the filler can never keep would have the writer ask forever.
      boolean mayTake = held == 0 || held + wanted <= perNamespaceBytes();
      // Rather than a file with a long tail, one of the right size, if the budget has room
      // for it as it is (no pooled file is given back to make a smaller one).
      boolean room = fit == null || filling >= wanted
          || pooledBytes() + handedOutBytes() + wanted <= budget;
      if (mayTake && room && growFor(wanted)) {
        return Handout.LATER;
      }
      if (fit == null) {
        return Handout.REFUSED;
      }
    }
    // Half the budget per user, except a user holding none may take any one file: a single
    // write larger than half still gets one.
    if (held > 0 && held + fit.size() > perNamespaceBytes()) {
      return Handout.REFUSED;
    }
    Path staged = target.path().resolve(stagedName);
    try {
      target.handIn(fit.path(), stagedName); // given to its account while only we can reach it
    } catch (IOException | RuntimeException e) {
      LOG.warning("cannot hand arena file " + fit.path() + " to " + staged + ": " + e);
      return Handout.REFUSED;
    }
    pool.remove(fit);
    handedOut.put(staged, new HandedOut(namespace, fit.size()));
    handOuts++;
    plan.add(roundUp(size)); // made again: a loop of same-sized writes finds one each time
    notifyAll();
    return new Handout(fit.size(), false);
  }

  /**
   * Whether a file is so much longer than the write that its writer would pay for freeing the
   * tail (a 4 GiB file cut to 1 GiB: 0.41 s at ftruncate, measured on the GPU machine).
   */
  private boolean tooLong(long fileSize, long wanted) {
    return fileSize > 2 * wanted && fileSize - wanted > longTail;
  }

  @Override
  public long perNamespaceBytes() {
    return budget / 2;
  }

  @Override
  public synchronized Stats stats() {
    forgetUsed();
    return new Stats(budget, pooledBytes(), handedOutBytes(), handOuts, givenBack);
  }

  @Override
  public void close() {
    synchronized (this) {
      closed = true;
      notifyAll();
    }
    filler.interrupt();
    try {
      filler.join(5000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    synchronized (this) {
      pool.clear();
      dev.bulletin.bridge.UserFolder.deleteTree(folder);
    }
  }

  // ---- the background thread -----------------------------------------------------------------

  private void fillLoop() {
    ByteBuffer zeros = ByteBuffer.allocateDirect(1 << 20);
    while (true) {
      long size;
      synchronized (this) {
        try {
          while (!closed && !wantsMore()) {
            wait(CHECK_MILLIS);
            if (pressed(GRANULE)) {
              giveBackAll();
            }
          }
        } catch (InterruptedException e) {
          return;
        }
        if (closed) {
          return;
        }
        if (pressed(plan.get(0))) {
          giveBackAll();
          try {
            wait(CHECK_MILLIS);
          } catch (InterruptedException e) {
            return;
          }
          continue;
        }
        size = filling = plan.remove(0);
      }
      Path made = folder.resolve((counter++) + "-" + size);
      boolean ok = fill(made, size, zeros);
      synchronized (this) {
        filling = 0;
        if (ok && !closed) {
          pool.add(new Pooled(made, size));
        } else {
          Files2.deleteQuietly(made);
        }
        notifyAll();
      }
    }
  }

  /** Writes zeros over the whole file: every page allocated, off every write path. */
  private boolean fill(Path path, long size, ByteBuffer zeros) {
    try (FileChannel out = FileChannel.open(path, java.util.Set.of(StandardOpenOption.CREATE_NEW,
        StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(
            PosixFilePermissions.fromString("rw-------")))) {
      for (long at = 0; at < size; ) {
        ByteBuffer chunk = zeros.duplicate();
        chunk.limit((int) Math.min(chunk.capacity(), size - at));
        at += out.write(chunk, at);
      }
      return true;
    } catch (IOException e) {
      if (Thread.currentThread().isInterrupted()) {
        return false; // closing: the fill was cut on purpose
      }
      LOG.warning("cannot fill arena file " + path + " (" + size + " bytes): " + e
          + "; the arena stops growing until memory is handed out");
      synchronized (this) {
        plan.clear();
      }
      return false;
    }
  }

  private boolean wantsMore() {
    if (filling > 0) {
      return false;
    }
    long pooled = pooledBytes();
    while (!plan.isEmpty() && pooled + plan.get(0) > budget) {
      plan.remove(0); // can no longer fit the budget (smaller ones may)
    }
    forgetUsed();
    // Files handed out and not used yet still count: wait until they are.
    return !plan.isEmpty() && pooled + handedOutBytes() + plan.get(0) <= budget;
  }

  /**
   * A request no file fits: the next file is made that large, giving back smaller ones.
   *
   * @return whether one will be made (false: larger than what the budget leaves beside the
   *     files handed out and not yet used)
   */
  private boolean growFor(long size) {
    if (handedOutBytes() + size > budget) {
      return false;
    }
    if (filling >= size) {
      return true;
    }
    // Asked again while it waits: files filled meanwhile may stand in its way too.
    pool.sort(Comparator.comparingLong(Pooled::size));
    while (!pool.isEmpty() && pooledBytes() + handedOutBytes() + size > budget) {
      Files2.deleteQuietly(pool.remove(0).path());
      givenBack++;
    }
    if (!plan.isEmpty() && plan.get(0) == size) {
      return true;
    }
    plan.remove(Long.valueOf(size)); // planned further back: it moves to the front
    plan.add(0, size);
    notifyAll();
    return true;
  }

  private boolean pressed(long nextSize) {
    try {
      if (Files.getFileStore(folder).getUsableSpace() < 2 * nextSize) {
        return true;
      }
    } catch (IOException e) {
      return true;
    }
    return pressure.low();
  }

  /** Deletes the pool; its sizes are made again once memory allows. */
  private void giveBackAll() {
    for (Pooled pooled : pool) {
      Files2.deleteQuietly(pooled.path());
      givenBack++;
      plan.add(pooled.size());
    }
    pool.clear();
  }

  /** Handed-out files that are gone (written and adopted, or deleted) count no more. */
  private void forgetUsed() {
    handedOut.keySet().removeIf(path -> !Files.exists(path));
  }

  private long pooledBytes() {
    return pool.stream().mapToLong(Pooled::size).sum();
  }

  private long handedOutBytes() {
    return handedOut.values().stream().mapToLong(HandedOut::size).sum();
  }

  static long roundUp(long size) {
    return (size + GRANULE - 1) / GRANULE * GRANULE;
  }

  /** Sizes that fill a budget: powers of two plus a granule (an object's header), largest first. */
  static List<Long> ladder(long budget) {
    List<Long> sizes = new ArrayList<>();
    long left = budget;
    for (long power = 1L << 40; power >= MIN_FILE; ) {
      if (power + GRANULE <= left) {
        sizes.add(power + GRANULE);
        left -= power + GRANULE;
      } else {
        power >>= 1;
      }
    }
    return sizes;
  }
}
