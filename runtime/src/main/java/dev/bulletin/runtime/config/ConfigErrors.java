package dev.bulletin.runtime.config;

import java.util.ArrayList;
import java.util.List;

/**
 * The mistakes found while reading one config: readers add to it and go on, so that the file's
 * author sees every mistake at once; {@link #throwIfAny} ends the reading.
 */
public final class ConfigErrors {
  private final List<ConfigError> errors = new ArrayList<>();

  /** A mistake of the field at {@code path}: "path: message" (the message alone at the top). */
  public void add(String path, String message) {
    errors.add(new ConfigError(path, path.isEmpty() ? message : path + ": " + message));
  }

  /**
   * A record's own validation, which names its fields relative to the block it was built from
   * ("max_workers (2) must be ...", "worker.gpus must be ..."): prefixes the block's path, once.
   */
  public void addFromRecord(String path, String message) {
    String prefix = path;
    int dot = prefix.lastIndexOf('.');
    // A block's record may name its fields from the block ("worker.gpus"), the path ends with it.
    if (dot > 0 && message.startsWith(prefix.substring(dot + 1) + ".")) {
      prefix = prefix.substring(0, dot);
    }
    boolean absolute = prefix.isEmpty() || message.startsWith(path);
    errors.add(new ConfigError(path, absolute ? message : prefix + "." + message));
  }

  public int count() {
    return errors.size();
  }

  /** Whether an error was added since {@code count()} was {@code mark}, at or under {@code path}. */
  boolean anySince(int mark, String path) {
    return errors.subList(mark, errors.size()).stream().map(ConfigError::path)
        .anyMatch(p -> path.isEmpty() || p.equals(path) || p.startsWith(path + ".")
            || p.startsWith(path + "["));
  }

  public List<ConfigError> list() {
    return List.copyOf(errors);
  }

  /** @param source what was read, e.g. "config file x.yaml"; null to start with the paths */
  public void throwIfAny(String source) {
    if (!errors.isEmpty()) {
      throw new ConfigException(source, errors);
    }
  }
}
