package dev.bulletin.runtime.config;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Turns YAML text into the tree {@link ConfigNode} reads. */
public final class ConfigYaml {
  // A key given twice in one mapping is refused: YAML forbids it, and Jackson would otherwise
  // keep the last one silently (a second `groups:` quietly replacing the first).
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory())
      .enable(DeserializationFeature.FAIL_ON_READING_DUP_TREE_KEY);
  private static final Pattern DUPLICATE = Pattern.compile("^Duplicate field '(.*)' for");

  private ConfigYaml() {}

  /**
   * The document's tree (null for an empty document).
   *
   * @param source what is read, for the error ("config file x.yaml"); null for none
   * @throws ConfigException when the text is not YAML: nothing else can be read then
   */
  public static JsonNode parse(String text, String source) {
    try {
      return YAML.readTree(text);
    } catch (JsonProcessingException e) {
      String where = e.getLocation() == null ? ""
          : " (line " + e.getLocation().getLineNr() + ", column " + e.getLocation().getColumnNr() + ")";
      Matcher twice = DUPLICATE.matcher(e.getOriginalMessage());
      String what = twice.find() ? "the key '" + twice.group(1) + "' is given twice in one mapping"
          : e.getOriginalMessage();
      throw new ConfigException(source, List.of(new ConfigError("",
          "not valid YAML" + where + ": " + what)));
    }
  }

  /**
   * Reads one section of a whole document with {@code reader}, for tests and tools: other
   * sections are ignored; every mistake in the section is thrown together.
   */
  public static <T> T readSection(String yaml, Function<ConfigNode, Optional<T>> reader) {
    ConfigErrors errors = new ConfigErrors();
    Optional<T> section = reader.apply(ConfigNode.root(parse(yaml, null), errors));
    errors.throwIfAny(null);
    return section.orElseThrow();
  }
}
