package dev.bulletin.runtime.objects;

import dev.bulletin.bridge.ObjectKey;
import java.util.LinkedHashMap;
import java.util.Map;

/** One spill object of one worker, and the handles it holds for the runtime's directory. */
public final class ResidentSpill {
  final String workerId;
  final ObjectKey key;
  final long size;
  final String kind;
  /** Handle id to the client session that kept it; only the handles still named here. */
  final Map<String, String> handles;
  /**
   * No agent holds it any more (the embedded worker's, after a restart of the runtime): the
   * runtime's store serves it to a call on any worker, its own too.
   */
  boolean agentGone;

  ResidentSpill(String workerId, ObjectKey key, long size, String kind,
      Map<String, String> handles) {
    this.workerId = workerId;
    this.key = key;
    this.size = size;
    this.kind = kind;
    this.handles = new LinkedHashMap<>(handles);
  }

  public String workerId() {
    return workerId;
  }

  public ObjectKey key() {
    return key;
  }

  public long size() {
    return size;
  }

  public String kind() {
    return kind;
  }

  public Map<String, String> handles() {
    return Map.copyOf(handles);
  }
}
