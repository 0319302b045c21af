package dev.bulletin.runtime.workers;

import java.util.Collection;
import java.util.HashMap;
import java.util.Map;

/**
 * Which GPUs of one worker keep a client session's resident values between its calls (issue
 * 29), as the runtime last learnt: a call that returned while its executor kept bytes on its
 * GPUs marks them with its session; a call of another session placed there clears them (the
 * worker spills the values before that call runs), as do the session's end and a later call of
 * the session that left nothing kept. The scheduler reads it to give a session's call its own
 * GPU back and to steer other calls to GPUs without such state.
 *
 * <p>A spill the worker makes on its own (an idle timeout, the host's cap) is not reported
 * here: the mark stays until one of the above, and costs at most a preference among otherwise
 * equal GPUs. Runs on the control plane's event loop.
 */
public final class ResidentGpus {

  /** GPU id to the session that keeps values there ("namespace session"). */
  private final Map<Integer, String> keptBy = new HashMap<>();

  /** The key of a client session: its user's namespace and its id. */
  public static String session(String namespace, String sessionId) {
    return namespace + " " + sessionId;
  }

  /** A call of {@code session} on {@code gpus} ended, its executor keeping {@code bytes}. */
  public void callEnded(Collection<Integer> gpus, String session, long bytes) {
    for (int gpu : gpus) {
      if (bytes > 0) {
        keptBy.put(gpu, session);
      } else {
        keptBy.remove(gpu, session);
      }
    }
  }

  /** A call of {@code session} was placed on {@code gpus}: another session's values go. */
  public void taken(Collection<Integer> gpus, String session) {
    for (int gpu : gpus) {
      String keeper = keptBy.get(gpu);
      if (keeper != null && !keeper.equals(session)) {
        keptBy.remove(gpu);
      }
    }
  }

  /** The session ended or released its values. */
  public void sessionEnded(String session) {
    keptBy.values().removeIf(session::equals);
  }

  /** GPU id to the session keeping values there; a copy. */
  public Map<Integer, String> snapshot() {
    return Map.copyOf(keptBy);
  }
}
