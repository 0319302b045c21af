package dev.bulletin.runtime.identity;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.bulletin.runtime.pool.PoolsConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The runtime's YAML file: users and worker pools (docs/pools.md); later issues add QoS classes
 * and quotas.
 *
 * <pre>
 * users:
 *   - name: ada
 *     group: vision
 *     token: "a-long-random-string"
 * </pre>
 */
public record RuntimeConfig(
    @JsonProperty("users") List<User> users,
    @JsonProperty("pools") PoolsConfig pools) {

  public static final String DEFAULT_GROUP = "default";

  public RuntimeConfig {
    users = users == null ? List.of() : List.copyOf(users);
    pools = pools == null ? PoolsConfig.none() : pools;
  }

  public RuntimeConfig(List<User> users) {
    this(users, PoolsConfig.none());
  }

  public static RuntimeConfig empty() {
    return new RuntimeConfig(List.of(), PoolsConfig.none());
  }

  public record User(
      @JsonProperty("name") String name,
      @JsonProperty("group") String group,
      @JsonProperty("token") String token) {
    public User {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("users[].name is required");
      }
      if (token == null || token.length() < 16) {
        throw new IllegalArgumentException("users[" + name + "].token must be at least 16"
            + " characters (make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')");
      }
      group = group == null || group.isBlank() ? DEFAULT_GROUP : group;
    }
  }

  /** Reads and validates the file; errors name the file and the field. */
  public static RuntimeConfig load(Path file) {
    ObjectMapper yaml = new ObjectMapper(new YAMLFactory())
        .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
    try {
      if (!Files.isRegularFile(file)) {
        throw new IllegalArgumentException("config file " + file + " does not exist");
      }
      RuntimeConfig config = yaml.readValue(file.toFile(), RuntimeConfig.class);
      return config == null ? empty() : config;
    } catch (UnrecognizedPropertyException e) {
      throw new IllegalArgumentException("config file " + file + ": unknown field '"
          + e.getPropertyName() + "' (known: " + e.getKnownPropertyIds() + ")", e);
    } catch (IOException e) {
      Throwable cause = e.getCause() instanceof IllegalArgumentException ? e.getCause() : e;
      throw new IllegalArgumentException("config file " + file + ": " + cause.getMessage(), e);
    }
  }
}
