package dev.bulletin.worker;

import dev.bulletin.bridge.ObjectKey;
import java.util.Map;

/**
 * Told of the spill objects of an agent's resident values (issue 29): the runtime keeps a
 * directory of them, so a user's next call on another host can restore them there. Called on
 * the agent's threads, under its lock: an implementation only hands the news on (to its event
 * loop), never blocks.
 */
public interface SpillListener {

  /**
   * An executor spilled a user's resident values into {@code spill} (in the user's namespace),
   * which the agent now holds.
   *
   * @param handles each handle id in it, to the client session that kept it ("": none named)
   */
  void spilled(ObjectKey spill, long size, Map<String, String> handles);

  /** The agent no longer holds that spill object for its values (dropped, superseded). */
  void gone(ObjectKey spill);

  SpillListener NONE = new SpillListener() {
    @Override
    public void spilled(ObjectKey spill, long size, Map<String, String> handles) { }

    @Override
    public void gone(ObjectKey spill) { }
  };
}
