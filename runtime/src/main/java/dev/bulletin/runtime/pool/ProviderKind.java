package dev.bulletin.runtime.pool;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/** Where a pool's workers come from. */
public enum ProviderKind {
  /** Worker processes on the runtime's own host. */
  LOCAL,
  /** Slurm batch jobs, one worker per job. */
  SLURM,
  /** Kubernetes Pods, one worker per Pod. */
  KUBERNETES;

  /** How the journal's PoolWorker records name the kind ({@code K8S:namespace/name}). */
  public String journalTag() {
    return this == KUBERNETES ? "K8S" : name();
  }

  /** The kind a journal tag names; IllegalArgumentException for any other text. */
  public static ProviderKind ofJournalTag(String tag) {
    for (ProviderKind kind : values()) {
      if (kind.journalTag().equals(tag)) {
        return kind;
      }
    }
    throw new IllegalArgumentException("no provider has the journal tag '" + tag + "'");
  }

  public String configName() {
    return name().toLowerCase(Locale.ROOT);
  }

  static String allowed() {
    return Arrays.stream(values()).map(ProviderKind::configName).collect(Collectors.joining(", "));
  }

  static ProviderKind parse(String text) {
    for (ProviderKind kind : values()) {
      if (kind.configName().equals(text)) {
        return kind;
      }
    }
    throw new IllegalArgumentException("unknown provider '" + text + "' (allowed: " + allowed() + ")");
  }
}
