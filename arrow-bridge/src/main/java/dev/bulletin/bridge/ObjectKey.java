package dev.bulletin.bridge;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.regex.Pattern;

/**
 * An object as the store knows it: its owner's namespace and its content id. Two users who store
 * the same bytes get two objects: one user's objects are never served to another, and dedup stays
 * safe with a non-cryptographic content id.
 *
 * @param namespace the owner's folder name, from {@link #namespaceOf}
 */
public record ObjectKey(String namespace, ObjectId id) {

  private static final Pattern SAFE = Pattern.compile("[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}");

  public ObjectKey {
    if (namespace == null || !SAFE.matcher(namespace).matches()) {
      throw new IllegalArgumentException("object namespace must be 1-64 characters of"
          + " [A-Za-z0-9_.-] not starting with '.', got: " + namespace);
    }
    if (id == null) {
      throw new IllegalArgumentException("object id is required");
    }
  }

  public static ObjectKey of(String namespace, String hexId) {
    return new ObjectKey(namespace, ObjectId.parse(hexId));
  }

  /** The folder name of a user's objects: the name itself when it is a safe file name. */
  public static String namespaceOf(String user) {
    if (user != null && SAFE.matcher(user).matches()) {
      return user;
    }
    try {
      byte[] digest = MessageDigest.getInstance("SHA-256")
          .digest(String.valueOf(user).getBytes(StandardCharsets.UTF_8));
      return "u-" + HexFormat.of().formatHex(digest, 0, 12);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK ships SHA-256", e);
    }
  }

  /** The object's path relative to a store folder: {@code namespace/id}. */
  public String relativePath() {
    return namespace + "/" + id.hex();
  }

  @Override
  public String toString() {
    return relativePath();
  }
}
