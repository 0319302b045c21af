package dev.bulletin.runtime.config;

import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.PolicyYaml;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * The runtime's YAML file: users, worker pools (docs/pools.md) and the scheduling policy
 * ({@code qos:}, {@code groups:}, {@code limits:}, {@code scheduler:}, read by {@link PolicyYaml};
 * docs/scheduler.md). Validated once, here: a file with mistakes is refused with all of them.
 * A file is also checked against the machine that reads it ({@link HostChecks}: run_as accounts,
 * the owner's name); a config built in code only against itself.
 *
 * <pre>
 * allow_system_accounts: false   # true: run_as may name accounts below UID_MIN
 * users:
 *   - name: ada
 *     group: vision
 *     token: "a-long-random-string"
 *     run_as: ada
 * </pre>
 */
public record RuntimeConfig(List<User> users, PoolsConfig pools, PolicyConfig policy) {

  public static final String DEFAULT_GROUP = "default";

  public RuntimeConfig {
    users = users == null ? List.of() : List.copyOf(users);
    pools = pools == null ? PoolsConfig.none() : pools;
    policy = policy == null ? PolicyConfig.defaults() : policy;
    ConfigErrors errors = new ConfigErrors();
    UsersSection.check(UsersSection.placed(users), policy, ClusterTokens.NONE, errors);
    errors.throwIfAny(null);
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

  /**
   * One person who may use the cluster. Fields are named relative to the user's entry; the
   * reader adds the entry's path ({@code users[1] (bob)}). An {@code admin} sees every user's
   * calls in status, as the owner does (and gains no other right). {@code runAs} is the Unix
   * account this user's executors run as when the runtime runs as root (and that owns this
   * user's store folder), or null.
   */
  public record User(String name, String group, String token, boolean admin, String runAs) {
    /** A Unix account name as useradd accepts it. */
    private static final java.util.regex.Pattern ACCOUNT =
        java.util.regex.Pattern.compile("[a-z_][a-z0-9_-]{0,31}");

    static final int MIN_TOKEN_LENGTH = 16;
    static final String MAKE_A_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))'";

    public User {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("name: is required (for example: ada)");
      }
      if (token == null || token.length() < MIN_TOKEN_LENGTH) {
        throw new IllegalArgumentException("token: must be at least " + MIN_TOKEN_LENGTH
            + " characters (make one with: " + MAKE_A_TOKEN + ")");
      }
      group = group == null || group.isBlank() ? DEFAULT_GROUP : group;
      if (runAs != null && !ACCOUNT.matcher(runAs).matches()) {
        throw new IllegalArgumentException("run_as: must be a Unix account name (lower case"
            + " letters, digits, '_' and '-'), got '" + runAs + "'");
      }
      if ("root".equals(runAs)) {
        throw new IllegalArgumentException("run_as: must not be root: it would give that"
            + " user's code the whole machine");
      }
    }

    public User(String name, String group, String token) {
      this(name, group, token, false, null);
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
    return load(file, ClusterTokens.NONE);
  }

  /**
   * Reads and validates the file against this machine ({@link ConfigHost#thisMachine()}), and
   * refuses a user whose token is one of the cluster's own tokens.
   */
  public static RuntimeConfig load(Path file, ClusterTokens tokens) {
    return load(file, tokens, ConfigHost.thisMachine());
  }

  /**
   * Reads and validates the file, and refuses a user whose token is one of the cluster's own
   * tokens, or whose name or run_as does not fit {@code host}; every mistake in the file is in
   * the one exception.
   *
   * @throws ConfigException listing every mistake, each with its field's path
   */
  public static RuntimeConfig load(Path file, ClusterTokens tokens, ConfigHost host) {
    String source = "config file " + file;
    if (!Files.isRegularFile(file)) {
      throw new IllegalArgumentException(source + " does not exist");
    }
    String text;
    try {
      text = Files.readString(file);
    } catch (IOException e) {
      throw new IllegalArgumentException(source + " cannot be read: " + e.getMessage(), e);
    }
    return parse(text, source, tokens, host);
  }

  /** Reads a whole document, checked against this machine ({@link ConfigHost#thisMachine()}). */
  public static RuntimeConfig parse(String yaml, String source, ClusterTokens tokens) {
    return parse(yaml, source, tokens, ConfigHost.thisMachine());
  }

  /**
   * Reads a whole document.
   *
   * @param source what is read, at the start of the error ("config file x.yaml"); null for none
   * @param host the machine its users' names and run_as accounts are checked against
   */
  public static RuntimeConfig parse(String yaml, String source, ClusterTokens tokens,
      ConfigHost host) {
    ConfigErrors errors = new ConfigErrors();
    ConfigNode root = ConfigNode.root(ConfigYaml.parse(yaml, source), errors);
    List<UsersSection.Placed> users = UsersSection.read(root);
    boolean allowSystemAccounts = root.bool(HostChecks.ALLOW_SYSTEM_ACCOUNTS, false);
    Optional<PoolsConfig> pools = PoolsConfig.read(root);
    Optional<PolicyConfig> policy = PolicyYaml.read(root);
    root.rejectUnknown();
    UsersSection.check(users, policy.orElse(null), tokens, errors);
    HostChecks.check(users, host, allowSystemAccounts, errors);
    errors.throwIfAny(source);
    return new RuntimeConfig(users.stream().map(UsersSection.Placed::user).toList(),
        pools.orElseThrow(), policy.orElseThrow());
  }

  /**
   * Refuses users whose token is the owner's or the workers': whoever held it would have their
   * rights. The runtime calls this with the tokens it was started with.
   *
   * @throws ConfigException naming each such user's token field
   */
  public void checkTokens(ClusterTokens tokens) {
    ConfigErrors errors = new ConfigErrors();
    UsersSection.check(UsersSection.placed(users), policy, tokens, errors);
    errors.throwIfAny(null);
  }
}
