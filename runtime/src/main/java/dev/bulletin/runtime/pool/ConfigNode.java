package dev.bulletin.runtime.pool;

import dev.bulletin.protocol.Quantities;
import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * One mapping of the YAML tree with its path ("pools[0] (gpu).worker"), so that every error names
 * the field it is about and, for unknown keys, the keys that are allowed.
 */
final class ConfigNode {
  private final JsonNode node;
  private final String path;
  private final Set<String> read = new LinkedHashSet<>();

  ConfigNode(JsonNode node, String path) {
    if (node == null || !node.isObject()) {
      throw new IllegalArgumentException(path + ": must be a mapping of fields, got "
          + (node == null ? "nothing" : node.getNodeType().toString().toLowerCase()));
    }
    this.node = node;
    this.path = path;
  }

  String path() {
    return path;
  }

  String field(String key) {
    return path + "." + key;
  }

  IllegalArgumentException error(String key, String message) {
    return new IllegalArgumentException(field(key) + ": " + message);
  }

  boolean has(String key) {
    read.add(key);
    return node.hasNonNull(key);
  }

  Optional<String> string(String key) {
    if (!has(key)) {
      return Optional.empty();
    }
    JsonNode value = node.get(key);
    if (!value.isValueNode()) {
      throw error(key, "must be a single value, got a " + value.getNodeType().toString().toLowerCase());
    }
    return Optional.of(value.asText().trim());
  }

  String requiredString(String key, String example) {
    return string(key).filter(s -> !s.isEmpty())
        .orElseThrow(() -> error(key, "is required (for example: " + example + ")"));
  }

  int integer(String key, int fallback, int min) {
    if (!has(key)) {
      return fallback;
    }
    JsonNode value = node.get(key);
    if (!value.canConvertToInt() || !value.isIntegralNumber()) {
      throw error(key, "must be a whole number >= " + min + ", got '" + value.asText() + "'");
    }
    if (value.intValue() < min) {
      throw error(key, "must be >= " + min + ", got " + value.intValue());
    }
    return value.intValue();
  }

  boolean bool(String key, boolean fallback) {
    if (!has(key)) {
      return fallback;
    }
    JsonNode value = node.get(key);
    if (!value.isBoolean()) {
      throw error(key, "must be true or false, got '" + value.asText() + "'");
    }
    return value.booleanValue();
  }

  Optional<Duration> duration(String key) {
    return string(key).map(text -> {
      try {
        return Quantities.parseDuration(text);
      } catch (IllegalArgumentException e) {
        throw error(key, e.getMessage());
      }
    });
  }

  Optional<Long> size(String key) {
    return string(key).map(text -> {
      try {
        return Quantities.parseSize(text);
      } catch (IllegalArgumentException e) {
        throw error(key, e.getMessage());
      }
    });
  }

  List<String> strings(String key) {
    if (!has(key)) {
      return List.of();
    }
    JsonNode value = node.get(key);
    if (!value.isArray()) {
      throw error(key, "must be a list of strings, e.g. [\"--constraint=a100\"]");
    }
    List<String> out = new ArrayList<>();
    for (JsonNode item : value) {
      if (!item.isValueNode()) {
        throw error(key, "must be a list of strings, got an entry " + item);
      }
      out.add(item.asText());
    }
    return out;
  }

  Optional<ConfigNode> child(String key) {
    if (!has(key)) {
      return Optional.empty();
    }
    return Optional.of(new ConfigNode(node.get(key), field(key)));
  }

  /** Call after reading every known key: anything else is a typo the sysadmin should see. */
  void rejectUnknown() {
    Iterator<String> names = node.fieldNames();
    while (names.hasNext()) {
      String name = names.next();
      if (!read.contains(name)) {
        throw new IllegalArgumentException(path + ": unknown field '" + name + "' (known: "
            + String.join(", ", read) + ")");
      }
    }
  }
}
