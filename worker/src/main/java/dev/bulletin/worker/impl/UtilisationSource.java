package dev.bulletin.worker.impl;

import java.util.Collection;
import java.util.Map;

/** One utilisation sample of a worker's GPUs. */
interface UtilisationSource {

  /** A running call: the GPUs it holds and its executor's process id (0 before it has one). */
  record Holder(String taskId, java.util.List<Integer> gpuIds, long pid) {}

  /** Each GPU's utilisation now, 0 to 1, by GPU index, for the GPUs of these running calls. */
  Map<Integer, Double> sample(Collection<Holder> holders);

  /** A call starts on its executor: a source that measures rates takes its baseline here. */
  default void begin(Holder holder) {}

  /**
   * Whether a sample is cheap enough to take on a call's own path when it ends (a few reads of
   * procfs), and exact for that call. A source that starts a process per sample (nvidia-smi:
   * tens of milliseconds) is not: a call's last stretch is then charged at its GPUs' latest
   * periodic sample.
   */
  default boolean samplesAtCallEnd() {
    return false;
  }

  String name();
}
