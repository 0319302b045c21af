package dev.bulletin.runtime.identity;

import dev.bulletin.runtime.config.ClusterTokens;
import dev.bulletin.runtime.config.RuntimeConfig;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

/**
 * Maps bearer tokens to identities. Tokens come from the runtime's config file and from the
 * owner's token that {@code bulletin up} made; anything else is refused.
 */
public final class TokenRegistry {

  private static final String BEARER = "Bearer ";
  /**
   * Identities by the SHA-256 of their token, not by the token: a lookup by the presented
   * token's digest costs the same with 2 users or 2,000 (comparing it with every token, each in
   * constant time, was a tenth of the event loop with 2,000 users: make bench-scale), and its
   * timing tells nothing about a token's prefix, since a guess's digest shares nothing with the
   * real token's digest that would lead to the token.
   */
  private final Map<String, Identity> byDigest;

  private TokenRegistry(Map<String, Identity> byToken) {
    Map<String, Identity> digests = new HashMap<>();
    byToken.forEach((token, identity) -> digests.put(digest(token.getBytes(
        StandardCharsets.UTF_8)), identity));
    this.byDigest = Map.copyOf(digests);
  }

  private static String digest(byte[] token) {
    try {
      return java.util.HexFormat.of().formatHex(
          MessageDigest.getInstance("SHA-256").digest(token));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
  }

  /**
   * @param ownerToken the token of the user who started the cluster, may be null
   * @param config users from the config file
   */
  public static TokenRegistry of(String ownerToken, String ownerUser, RuntimeConfig config) {
    return of(ownerToken, ownerUser, null, config);
  }

  /**
   * @param workerToken the cluster's worker token (workers attach with it), may be null: then no
   *     worker can attach and only the embedded one runs calls
   */
  public static TokenRegistry of(String ownerToken, String ownerUser, String workerToken,
      RuntimeConfig config) {
    // The config refused users sharing a token; here, users holding the owner's or workers' one.
    config.checkTokens(new ClusterTokens(ownerToken, workerToken));
    Map<String, Identity> tokens = new HashMap<>();
    for (RuntimeConfig.User user : config.users()) {
      tokens.put(user.token(), new Identity(user.name(), user.group(), false, false, user.admin()));
    }
    if (ownerToken != null && !ownerToken.isBlank()) {
      String group = config.users().stream().filter(u -> u.name().equals(ownerUser))
          .map(RuntimeConfig.User::group).findFirst().orElse(RuntimeConfig.DEFAULT_GROUP);
      tokens.put(ownerToken, new Identity(ownerUser, group, true));
    }
    if (workerToken != null && !workerToken.isBlank()
        && tokens.put(workerToken, Identity.workerAgent()) != null) {
      throw new IllegalArgumentException("the worker token equals the owner's token: workers need a"
          + " token of their own (BULLETIN_WORKER_TOKEN)");
    }
    if (tokens.isEmpty()) {
      throw new IllegalArgumentException("no tokens: set BULLETIN_OWNER_TOKEN or list users with"
          + " tokens in the config file");
    }
    return new TokenRegistry(tokens);
  }

  /** Looks up the value of an {@code authorization} header ("Bearer TOKEN"). */
  public Optional<Identity> authenticate(String authorization) {
    if (authorization == null || !authorization.startsWith(BEARER)) {
      return Optional.empty();
    }
    byte[] presented = authorization.substring(BEARER.length()).strip()
        .getBytes(StandardCharsets.UTF_8);
    return Optional.ofNullable(byDigest.get(digest(presented)));
  }
}
