package dev.bulletin.runtime.identity;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.PolicyYaml;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.TreeSet;

/**
 * The runtime's YAML file: users, worker pools (docs/pools.md) and the scheduling policy
 * ({@code qos:}, {@code groups:}, {@code limits:}, {@code scheduler:}, read by {@link PolicyYaml};
 * docs/scheduler.md).
 *
 * <pre>
 * users:
 *   - name: ada
 *     group: vision
 *     token: "a-long-random-string"
 *     run_as: ada          # optional: a Unix account; her executors run as it (runtime as root)
 * </pre>
 */
public record RuntimeConfig(List<User> users, PoolsConfig pools, PolicyConfig policy) {

  public static final String DEFAULT_GROUP = "default";

  public RuntimeConfig {
    users = users == null ? List.of() : List.copyOf(users);
    pools = pools == null ? PoolsConfig.none() : pools;
    policy = policy == null ? PolicyConfig.defaults() : policy;
  }

  public RuntimeConfig(List<User> users) {
    this(users, PoolsConfig.none());
  }

  /** Users and pools with the default scheduling policy. */
  public RuntimeConfig(List<User> users, PoolsConfig pools) {
    this(users, pools, PolicyConfig.defaults());
  }

  public static RuntimeConfig empty() {
    return new RuntimeConfig(List.of(), PoolsConfig.none());
  }

  /** The sections Jackson binds directly; the policy sections go to {@link PolicyYaml}. */
  private record Sections(
      @JsonProperty("users") List<User> users,
      @JsonProperty("pools") PoolsConfig pools) {}

  /**
   * @param runAs the Unix account this user's executors run as when the runtime runs as root
   *     (and this user's store folder belongs to it), or null
   */
  public record User(
      @JsonProperty("name") String name,
      @JsonProperty("group") String group,
      @JsonProperty("token") String token,
      @JsonProperty("run_as") String runAs) {

    /** A Unix account name as useradd accepts it. */
    private static final java.util.regex.Pattern ACCOUNT =
        java.util.regex.Pattern.compile("[a-z_][a-z0-9_-]{0,31}");

    public User(String name, String group, String token) {
      this(name, group, token, null);
    }

    public User {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("users[].name is required");
      }
      if (token == null || token.length() < 16) {
        throw new IllegalArgumentException("users[" + name + "].token must be at least 16"
            + " characters (make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')");
      }
      group = group == null || group.isBlank() ? DEFAULT_GROUP : group;
      if (runAs != null && !ACCOUNT.matcher(runAs).matches()) {
        throw new IllegalArgumentException("users[" + name + "].run_as must be a Unix account"
            + " name (lower case letters, digits, '_' and '-'), got '" + runAs + "'");
      }
      if ("root".equals(runAs)) {
        throw new IllegalArgumentException("users[" + name + "].run_as must not be root: it"
            + " would give that user's code the whole machine");
      }
    }
  }

  /** The Unix account each user's executors run as, for the users that name one. */
  public java.util.Map<String, String> runAsAccounts() {
    java.util.Map<String, String> accounts = new java.util.HashMap<>();
    users.stream().filter(user -> user.runAs() != null)
        .forEach(user -> accounts.put(user.name(), user.runAs()));
    return java.util.Map.copyOf(accounts);
  }

  /** Reads and validates the file; errors name the file and the field. */
  public static RuntimeConfig load(Path file) {
    ObjectMapper yaml = new ObjectMapper(new YAMLFactory())
        .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
    try {
      if (!Files.isRegularFile(file)) {
        throw new IllegalArgumentException("config file " + file + " does not exist");
      }
      JsonNode root = yaml.readTree(file.toFile());
      if (root == null || root.isMissingNode() || root.isNull()) {
        return empty();
      }
      if (!(root instanceof ObjectNode object)) {
        throw new IllegalArgumentException("config file " + file + ": expected a mapping of"
            + " sections (" + String.join(", ", knownSections()) + ")");
      }
      PolicyConfig policy;
      try {
        policy = PolicyYaml.parse(root);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("config file " + file + ": " + e.getMessage(), e);
      }
      ObjectNode rest = object.deepCopy();
      PolicyYaml.SECTIONS.forEach(rest::remove);
      Sections sections = yaml.treeToValue(rest, Sections.class);
      return sections == null ? new RuntimeConfig(List.of(), null, policy)
          : new RuntimeConfig(sections.users(), sections.pools(), policy);
    } catch (UnrecognizedPropertyException e) {
      throw new IllegalArgumentException("config file " + file + ": unknown field '"
          + e.getPropertyName() + "' (known: " + String.join(", ", knownSections()) + ")", e);
    } catch (IOException e) {
      Throwable cause = e.getCause() instanceof IllegalArgumentException ? e.getCause() : e;
      throw new IllegalArgumentException("config file " + file + ": " + cause.getMessage(), e);
    }
  }

  private static TreeSet<String> knownSections() {
    TreeSet<String> known = new TreeSet<>(PolicyYaml.SECTIONS);
    known.add("users");
    known.add("pools");
    return known;
  }
}
