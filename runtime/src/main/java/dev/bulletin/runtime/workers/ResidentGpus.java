package dev.bulletin.runtime.workers;

import java.util.Collection;
import java.util.HashMap;
import java.util.Map;

/**
 * Which GPUs of one worker keep a client session's resident values between its calls (issue
 * 29), as the runtime last learnt: a call that returned while its executor kept bytes on its
 * GPUs marks them with its session; another user's call placed there clears them (the worker
 * spills the values before that call runs: executors are a user's own, so a call of the same
 * user, even of another session, runs beside them and clears nothing), as do the session's end
 * and a later call of the session that left nothing kept. The scheduler reads it
 * ({@code WorkerState.residentGpus}) to give a session's call its own GPU back and to steer other
 * calls to GPUs without such state.
 *
 * <p>A spill the worker makes on its own (an idle timeout, the host's cap) is not reported
 * here: the mark stays until one of the above, and costs at most a preference among otherwise
 * equal GPUs. Runs on the control plane's event loop.
 */
public final class ResidentGpus {

  /** A session's key, as the scheduler compares them: "namespace session". */
  private record Keeper(String namespace, String session) {
    String key() {
      return ResidentGpus.key(namespace, session);
    }
  }

  private final Map<Integer, Keeper> keptBy = new HashMap<>();
  private long version;

  /** The scheduler's key of a client session: its user's namespace and its id. */
  public static String key(String namespace, String session) {
    return namespace + " " + session;
  }

  /** A call of the session on {@code gpus} ended, its executor keeping {@code bytes}. */
  public void callEnded(Collection<Integer> gpus, String namespace, String session, long bytes) {
    Keeper keeper = new Keeper(namespace, session);
    for (int gpu : gpus) {
      if (bytes > 0 ? !keeper.equals(keptBy.put(gpu, keeper)) : keptBy.remove(gpu, keeper)) {
        version++;
      }
    }
  }

  /** A call of {@code namespace}'s was placed on {@code gpus}: another user's values go. */
  public void taken(Collection<Integer> gpus, String namespace) {
    for (int gpu : gpus) {
      Keeper keeper = keptBy.get(gpu);
      if (keeper != null && !keeper.namespace().equals(namespace)) {
        keptBy.remove(gpu);
        version++;
      }
    }
  }

  /** The session ended or released its values. */
  public void sessionEnded(String namespace, String session) {
    if (keptBy.values().removeIf(new Keeper(namespace, session)::equals)) {
      version++;
    }
  }

  /** Moves whenever {@link #snapshot} would change: snapshots kept between passes compare it. */
  public long version() {
    return version;
  }

  /** Whether a GPU here keeps values of one of {@code namespace}'s sessions. */
  public boolean keepsFor(String namespace) {
    for (Keeper keeper : keptBy.values()) {
      if (keeper.namespace().equals(namespace)) {
        return true;
      }
    }
    return false;
  }

  /** GPU id to the key of the session keeping values there. */
  public Map<Integer, String> snapshot() {
    if (keptBy.isEmpty()) {
      return Map.of();
    }
    Map<Integer, String> keys = new HashMap<>();
    keptBy.forEach((gpu, keeper) -> keys.put(gpu, keeper.key()));
    return keys;
  }
}
