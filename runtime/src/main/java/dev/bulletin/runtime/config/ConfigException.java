package dev.bulletin.runtime.config;

import java.util.List;

/**
 * Every mistake found in one config file, so that one run shows them all. An {@link
 * IllegalArgumentException}: callers that only want a message need not know the type.
 */
public final class ConfigException extends IllegalArgumentException {
  private final List<ConfigError> errors;

  /**
   * @param source what was read ("config file /etc/bulletin.yaml"), or null when the errors
   *     already say it (a document given as text)
   */
  public ConfigException(String source, List<ConfigError> errors) {
    super(message(source, errors));
    if (errors.isEmpty()) {
      throw new IllegalArgumentException("a ConfigException needs at least one error");
    }
    this.errors = List.copyOf(errors);
  }

  public List<ConfigError> errors() {
    return errors;
  }

  /** One error on one line after the source; several as a count and one indented line each. */
  private static String message(String source, List<ConfigError> errors) {
    String prefix = source == null ? "" : source + ": ";
    if (errors.size() == 1) {
      return prefix + errors.get(0).line();
    }
    StringBuilder text = new StringBuilder(prefix).append(errors.size()).append(" errors:");
    errors.forEach(error -> text.append("\n  ").append(error.line()));
    return text.toString();
  }
}
