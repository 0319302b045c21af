package dev.bulletin.runtime.config;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.MissingNode;
import dev.bulletin.protocol.Quantities;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * One mapping of the config's YAML tree with its path ({@code pools[1] (gpu).worker}): the one
 * reader of the runtime's config file. Every getter checks the value's type and, when it is
 * wrong, adds an error naming the full path to the shared {@link ConfigErrors} and returns the
 * fallback, so that reading goes on and the file's author sees every mistake in one run. The
 * keys a section reads are the keys it allows: {@link #rejectUnknown} names any other.
 */
public final class ConfigNode {
  private final JsonNode node;
  private final String path;
  private final ConfigErrors errors;
  private final int errorsBefore;
  private final Set<String> read;

  private ConfigNode(JsonNode node, String path, ConfigErrors errors) {
    this(node, path, errors, new LinkedHashSet<>());
  }

  private ConfigNode(JsonNode node, String path, ConfigErrors errors, Set<String> read) {
    this.node = node;
    this.path = path;
    this.errors = errors;
    this.errorsBefore = errors.count();
    this.read = read;
  }

  /** The whole document; null or empty is an empty mapping, anything else but a mapping an error. */
  public static ConfigNode root(JsonNode document, ConfigErrors errors) {
    return mappingAt(document, "", errors, "a mapping of sections");
  }

  private static ConfigNode mappingAt(JsonNode value, String path, ConfigErrors errors,
      String expected) {
    if (value == null || value.isNull() || value.isMissingNode()) {
      return new ConfigNode(MissingNode.getInstance(), path, errors);
    }
    if (!value.isObject()) {
      errors.add(path, "expected " + expected + ", got " + describe(value));
      return new ConfigNode(MissingNode.getInstance(), path, errors);
    }
    return new ConfigNode(value, path, errors);
  }

  public String path() {
    return path;
  }

  /** The path of one of this mapping's fields. */
  public String field(String key) {
    return path.isEmpty() ? key : path + "." + key;
  }

  /** Whether the key has a value (not absent, not null); marks the key as allowed. */
  public boolean has(String key) {
    read.add(key);
    return node.hasNonNull(key);
  }

  /** Adds an error about one field ("path.key: message"). */
  public void error(String key, String message) {
    errors.add(field(key), message);
  }

  /** Adds an error about this whole mapping ("path: message"). */
  public void error(String message) {
    errors.add(path, message);
  }

  /** Whether anything in this mapping was found wrong since it was opened. */
  public boolean hasErrors() {
    return errors.anySince(errorsBefore, path);
  }

  // ---- scalars ------------------------------------------------------------------------------

  /** A single value as text, trimmed. */
  public Optional<String> string(String key) {
    return value(key, "a single value", JsonNode::isValueNode, v -> v.asText().trim());
  }

  /** Text that must be given and not empty; {@code example} shows a value in the error. */
  public Optional<String> requiredString(String key, String example) {
    boolean given = has(key);
    Optional<String> value = string(key);
    if (value.isPresent() && !value.get().isEmpty()) {
      return value;
    }
    if (!given || value.isPresent()) { // a value of the wrong type has its error already
      error(key, "is required (for example: " + example + ")");
    }
    return Optional.empty();
  }

  /** A name written as YAML text (a number or a mapping is not a name). */
  public String name(String key, String fallback) {
    return value(key, "a name", JsonNode::isTextual, JsonNode::asText).orElse(fallback);
  }

  /** A whole number; records check the range. */
  public int integer(String key, int fallback) {
    return value(key, "an integer", ConfigNode::isInt, JsonNode::intValue).orElse(fallback);
  }

  /** A whole number of at least {@code min}. */
  public int integer(String key, int fallback, int min) {
    Optional<Integer> value = value(key, "an integer", ConfigNode::isInt, JsonNode::intValue);
    if (value.isPresent() && value.get() < min) {
      error(key, "must be >= " + min + ", got " + value.get());
      return fallback;
    }
    return value.orElse(fallback);
  }

  /** A whole number or {@code unlimited} ({@link Integer#MAX_VALUE}); records check the range. */
  public int integerOrUnlimited(String key, int fallback) {
    if (isUnlimited(key)) {
      return Integer.MAX_VALUE;
    }
    return value(key, "an integer or unlimited", ConfigNode::isInt, JsonNode::intValue)
        .orElse(fallback);
  }

  /** Any number; records check the range. */
  public double number(String key, double fallback) {
    return value(key, "a number", JsonNode::isNumber, JsonNode::doubleValue).orElse(fallback);
  }

  /** A number or {@code unlimited} (infinity). */
  public double numberOrUnlimited(String key, double fallback) {
    if (isUnlimited(key)) {
      return Double.POSITIVE_INFINITY;
    }
    return value(key, "a number or unlimited", JsonNode::isNumber, JsonNode::doubleValue)
        .orElse(fallback);
  }

  public boolean bool(String key, boolean fallback) {
    return value(key, "true or false", JsonNode::isBoolean, JsonNode::booleanValue)
        .orElse(fallback);
  }

  /** A duration in the grammar of {@link Quantities}. */
  public Optional<Duration> duration(String key) {
    return string(key).flatMap(text -> parsed(key, text, Quantities::parseDuration));
  }

  /**
   * A duration, {@code unlimited}, or a YAML number of seconds: the forms the policy sections
   * have always accepted (the pools' fields take no bare number, which has no unit to read).
   */
  public Duration durationOrUnlimited(String key, Duration fallback) {
    if (has(key) && node.get(key).isIntegralNumber() && node.get(key).canConvertToLong()) {
      return Duration.ofSeconds(node.get(key).longValue());
    }
    return string(key).flatMap(text -> parsed(key, text, Quantities::parseDurationOrUnlimited))
        .orElse(fallback);
  }

  /** A size in the grammar of {@link Quantities} (bytes). */
  public Optional<Long> size(String key) {
    return string(key).flatMap(text -> parsed(key, text, Quantities::parseSize));
  }

  /** A list of single values; {@code example} shows one in the error. */
  public List<String> strings(String key, String example) {
    List<String> out = new ArrayList<>();
    if (!has(key)) {
      return out;
    }
    JsonNode value = node.get(key);
    if (!value.isArray()) {
      error(key, "expected a list, e.g. " + example + ", got " + describe(value));
      return out;
    }
    for (JsonNode item : value) {
      if (!item.isValueNode() || item.isNull() || item.asText().isBlank()) {
        error(key, "expected a list of single values, e.g. " + example + ", got an entry "
            + describe(item));
      } else {
        out.add(item.asText());
      }
    }
    return out;
  }

  /** A mapping of names to single values ({@code node_selector: {zone: a}}), in file order. */
  public Map<String, String> stringMap(String key) {
    Map<String, String> out = new java.util.LinkedHashMap<>();
    if (!has(key)) {
      return out;
    }
    JsonNode value = node.get(key);
    if (!value.isObject()) {
      error(key, "expected a mapping of names to values, got " + describe(value));
      return out;
    }
    value.fields().forEachRemaining(entry -> {
      if (!entry.getValue().isValueNode() || entry.getValue().isNull()) {
        error(key, "expected a single value for '" + entry.getKey() + "', got "
            + describe(entry.getValue()));
      } else {
        out.put(entry.getKey(), entry.getValue().asText());
      }
    });
    return out;
  }

  /** The value as written, for a field passed on whole to another tool (a Pod template). */
  public Optional<JsonNode> raw(String key) {
    return has(key) ? Optional.of(node.get(key)) : Optional.empty();
  }

  // ---- structure ----------------------------------------------------------------------------

  /** The mapping under {@code key}; empty if absent or (an error then) not a mapping. */
  public Optional<ConfigNode> mapping(String key) {
    if (!has(key)) {
      return Optional.empty();
    }
    ConfigNode child = mappingAt(node.get(key), field(key), errors, "a mapping of fields");
    return child.node.isMissingNode() ? Optional.empty() : Optional.of(child);
  }

  /**
   * The mapping under {@code key}, or an empty one when absent: for sections whose fields all
   * have defaults. A value that is not a mapping is an error.
   */
  public ConfigNode section(String key) {
    has(key);
    return mappingAt(node.get(key), field(key), errors, "a mapping of fields");
  }

  /**
   * The entries of a list of mappings, each with its path {@code key[i]}, followed by its
   * {@code name} where it has one ({@code pools[1] (gpu)}) so a person finds it in the file.
   *
   * @param expected what the list holds, for the error when it is not a list
   */
  public List<ConfigNode> list(String key, String expected) {
    List<ConfigNode> items = new ArrayList<>();
    if (!has(key)) {
      return items;
    }
    JsonNode value = node.get(key);
    if (!value.isArray()) {
      error(key, "must be a list of " + expected + ", got " + describe(value));
      return items;
    }
    for (int i = 0; i < value.size(); i++) {
      JsonNode item = value.get(i);
      JsonNode name = item.isObject() ? item.get("name") : null;
      boolean named = name != null && name.isValueNode() && !name.isNull()
          && !name.asText().isBlank();
      String label = field(key) + "[" + i + "]" + (named ? " (" + name.asText() + ")" : "");
      ConfigNode entry = mappingAt(item, label, errors, "a mapping of fields");
      if (!entry.node.isMissingNode()) {
        items.add(entry);
      } else if (item.isNull()) {
        entry.error("expected a mapping of fields, got nothing");
      }
    }
    return items;
  }

  /** The entries of a mapping of names to mappings ({@code qos: {batch: {...}}}), in file order. */
  public List<Map.Entry<String, ConfigNode>> named(String key) {
    has(key);
    ConfigNode section = mappingAt(node.get(key), field(key), errors, "a mapping of names to settings");
    List<Map.Entry<String, ConfigNode>> entries = new ArrayList<>();
    section.node.fields().forEachRemaining(entry -> entries.add(Map.entry(entry.getKey(),
        mappingAt(entry.getValue(), section.field(entry.getKey()), errors, "a mapping of fields"))));
    return entries;
  }

  /**
   * This mapping again, for a reader of some of its keys (the policy's sections of the top level):
   * keys it reads count as allowed here too, and {@link #build} sees only its own mistakes.
   */
  public ConfigNode scope() {
    return new ConfigNode(node, path, errors, read);
  }

  /** Call after reading every key this mapping allows: any other is a typo to show. */
  public void rejectUnknown() {
    for (Iterator<String> names = node.fieldNames(); names.hasNext(); ) {
      String name = names.next();
      if (!read.contains(name)) {
        error("unknown field '" + name + "' (allowed: " + String.join(", ", read) + ")");
      }
    }
  }

  /**
   * Builds this block's record unless something in it was already wrong (the record would
   * only repeat that mistake in other words). The record's own validation error is added with
   * this block's path.
   */
  public <T> Optional<T> build(Supplier<T> record) {
    if (hasErrors()) {
      return Optional.empty();
    }
    try {
      return Optional.of(record.get());
    } catch (IllegalArgumentException e) {
      errors.addFromRecord(path, e.getMessage());
      return Optional.empty();
    }
  }

  // ---- helpers ------------------------------------------------------------------------------

  private <T> Optional<T> value(String key, String expected,
      Predicate<JsonNode> accepts, Function<JsonNode, T> convert) {
    if (!has(key)) {
      return Optional.empty();
    }
    JsonNode value = node.get(key);
    if (!accepts.test(value)) {
      error(key, "expected " + expected + ", got " + describe(value));
      return Optional.empty();
    }
    return Optional.of(convert.apply(value));
  }

  private <T> Optional<T> parsed(String key, String text, Function<String, T> parse) {
    try {
      return Optional.of(parse.apply(text));
    } catch (IllegalArgumentException e) {
      error(key, e.getMessage());
      return Optional.empty();
    }
  }

  private boolean isUnlimited(String key) {
    return has(key) && node.get(key).isTextual() && node.get(key).asText().trim().equals("unlimited");
  }

  private static boolean isInt(JsonNode value) {
    return value.isIntegralNumber() && value.canConvertToInt();
  }

  /** How an error shows a wrong value: scalars quoted as written, containers by their kind. */
  static String describe(JsonNode value) {
    if (value == null || value.isNull() || value.isMissingNode()) {
      return "nothing";
    }
    if (value.isArray()) {
      return "a list";
    }
    if (value.isObject()) {
      return "a mapping";
    }
    String text = value.asText();
    return "'" + (text.length() > 40 ? text.substring(0, 37) + "..." : text) + "'";
  }
}
