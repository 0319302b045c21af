package dev.bulletin.runtime.web;

import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.identity.TokenRegistry;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Optional;

/**
 * Who may read what on the HTTP port. The dashboard's JSON API takes a user's token (the same
 * tokens as the gRPC API, as a bearer header) and shows what the gRPC status shows that user.
 * {@code /metrics} is open to loopback (a Prometheus on the head node, or the owner's curl);
 * from elsewhere it takes the metrics token ({@code BULLETIN_METRICS_TOKEN}) or the token of
 * the owner or an admin: the metrics carry every user's and group's GPU-seconds, which a plain
 * user may not see (docs/observability.md).
 */
public final class WebAccess {

  /** What a request may do: read as {@code identity} (null for metrics-only access), or not. */
  public sealed interface Decision {
    record Allowed(Identity identity) implements Decision {}

    /** @param status 401 (no or unknown token) or 403 (a token that may not read this) */
    record Refused(int status, String message) implements Decision {}
  }

  static final String UNKNOWN_TOKEN = "the token is not known to this cluster: use the token"
      + " `bulletin up` wrote (~/.bulletin/token) or the one your administrator gave you";

  private final TokenRegistry tokens;
  private final byte[] metricsToken;

  /**
   * @param metricsToken the token a Prometheus elsewhere scrapes with, or null for none
   * @throws IllegalArgumentException when it is too short or is a user's, owner's or worker's
   */
  public WebAccess(TokenRegistry tokens, String metricsToken) {
    this.tokens = tokens;
    if (metricsToken != null && !metricsToken.isBlank()) {
      if (metricsToken.strip().length() < 16) {
        throw new IllegalArgumentException("BULLETIN_METRICS_TOKEN must be at least 16"
            + " characters (make one with: python -c 'import secrets;"
            + " print(secrets.token_urlsafe(32))')");
      }
      if (tokens.authenticate("Bearer " + metricsToken).isPresent()) {
        throw new IllegalArgumentException("BULLETIN_METRICS_TOKEN equals a user's, the owner's"
            + " or the workers' token: the metrics token needs one of its own");
      }
      this.metricsToken = metricsToken.strip().getBytes(StandardCharsets.UTF_8);
    } else {
      this.metricsToken = null;
    }
  }

  /** The dashboard's API: a user's token (the owner's and admins' too), never the workers'. */
  public Decision user(String authorization) {
    Optional<Identity> identity = tokens.authenticate(authorization);
    if (identity.isEmpty()) {
      return new Decision.Refused(401, authorization == null ? "log in with your bulletin token"
          + " (sent as the header Authorization: Bearer TOKEN)" : UNKNOWN_TOKEN);
    }
    if (identity.get().worker()) {
      return new Decision.Refused(403, "the worker token only attaches workers; log in with a"
          + " user's token");
    }
    return new Decision.Allowed(identity.get());
  }

  /** {@code /metrics}: loopback, the metrics token, or the owner's or an admin's token. */
  public Decision metrics(boolean fromLoopback, String authorization) {
    if (fromLoopback) {
      return new Decision.Allowed(null);
    }
    if (metricsToken != null && authorization != null && authorization.startsWith("Bearer ")
        && MessageDigest.isEqual(metricsToken, authorization.substring(7).strip()
            .getBytes(StandardCharsets.UTF_8))) {
      return new Decision.Allowed(null);
    }
    Optional<Identity> identity = tokens.authenticate(authorization);
    if (identity.isPresent() && identity.get().seesAll()) {
      return new Decision.Allowed(identity.get());
    }
    String needs = "scraping /metrics from another host needs the metrics token"
        + " (BULLETIN_METRICS_TOKEN of the runtime) or the owner's or an admin's token, as the"
        + " header Authorization: Bearer TOKEN";
    return identity.isPresent() ? new Decision.Refused(403, needs + "; "
        + identity.get().user() + " is neither") : new Decision.Refused(401, needs);
  }

  /** Whether a peer address is this machine's loopback (127.0.0.0/8, ::1). */
  public static boolean loopback(String host) {
    if (host == null) {
      return false;
    }
    try {
      // A literal address only: never a name lookup on a request's path.
      if (!host.matches("[0-9a-fA-F:.%]+")) {
        return false;
      }
      return InetAddress.getByName(host).isLoopbackAddress();
    } catch (UnknownHostException e) {
      return false;
    }
  }
}
