package dev.bulletin.runtime.config;

/**
 * One mistake in the config: where it is ({@code pools[1] (gpu).worker}, {@code users[0] (ada)};
 * empty for the whole file) and the whole line a person reads, which starts with that path.
 */
public record ConfigError(String path, String line) {
  @Override
  public String toString() {
    return line;
  }
}
