package dev.bulletin.bridge;

import java.util.regex.Pattern;

/**
 * The content id of an object: the lowercase hex digest of its bytes, computed by whoever encodes
 * the object (the Python codec: xxh3-128, 32 hex digits). The store does not re-hash: objects are
 * namespaced by owner ({@link ObjectKey}), so a non-cryptographic id can only collide with the
 * owner's own objects, and transfers carry CRC32C checks of their own.
 */
public record ObjectId(String hex) {

  private static final Pattern HEX = Pattern.compile("[0-9a-f]{32}|[0-9a-f]{64}");

  public ObjectId {
    if (hex == null || !HEX.matcher(hex).matches()) {
      throw new IllegalArgumentException("object id must be 32 lowercase hex digits (an xxh3-128"
          + " digest) or 64 (a SHA-256), got: " + hex);
    }
  }

  public static ObjectId parse(String hex) {
    return new ObjectId(hex);
  }

  @Override
  public String toString() {
    return hex;
  }
}
