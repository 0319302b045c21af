package dev.bulletin.bridge;

import java.nio.file.Path;

/**
 * Pre-faulted memory for the first large write into a store: one pool per host, filled in the
 * background, handed out one file at a time into the folder of the user who will write it.
 *
 * <p>On a tmpfs with 4 KiB pages the first write into a fresh file pays a page fault and a zeroed
 * page per 4 KiB, several times the copy itself. The arena pays that ahead of need, off every
 * write path, for the whole host at once (one budget, not one per client process). A pooled file
 * has held no one's bytes (its pages are fresh and zeroed) and sits in a folder only the store's
 * owner can enter; a handout moves it, whole and for good, into one namespace's folder and gives
 * it that folder's owner. No file goes back from a user to the pool, so no page that held or will
 * hold one user's bytes is ever reachable by another. See docs/data-plane.md.
 */
public interface StoreArena extends AutoCloseable {

  /**
   * Moves a pooled file of at least {@code size} bytes into {@code folder} as {@code stagedName},
   * owned by the folder's owner.
   *
   * @param namespace whose folder it is: one namespace holds at most half the budget in files
   *     handed out and not yet used, so no user can take the whole arena from the others
   * @return the file handed out, or none: then {@link Handout#later} says whether one may come
   *     (the pool is still filling; the next fill makes one that large)
   */
  Handout handOut(UserFolder folder, String namespace, long size, String stagedName);

  /** The most bytes one client is offered (what a namespace may hold handed out). */
  long perNamespaceBytes();

  Stats stats();

  /** Deletes the pooled files; handed-out ones belong to their folders. */
  @Override
  void close();

  /**
   * @param size the file's size, 0 for none
   * @param later with none: whether asking again later may give one (false: this user holds
   *     its share already, or the size is over the budget)
   */
  record Handout(long size, boolean later) {
    public static final Handout LATER = new Handout(0, true);
    public static final Handout REFUSED = new Handout(0, false);
  }

  /**
   * @param budgetBytes pooled plus handed-out-and-unused bytes, at most
   * @param pooledBytes bytes ready in the pool now
   * @param handedOutBytes bytes handed out whose files still wait to be written
   * @param handOuts files handed out since start
   * @param givenBack pooled files deleted under memory pressure, or to make room for a larger one
   */
  record Stats(long budgetBytes, long pooledBytes, long handedOutBytes, long handOuts,
      long givenBack) {}
}
