package dev.bulletin.bridge;

/**
 * The content id of an object: the lowercase hex digest of its bytes, computed by whoever encodes
 * the object (the Python codec: xxh3-128, 32 hex digits). The store does not re-hash: objects are
 * namespaced by owner ({@link ObjectKey}), so a non-cryptographic id can only collide with the
 * owner's own objects, and transfers carry CRC32C checks of their own.
 */
public record ObjectId(String hex) {


  public ObjectId {
    if (!isValid(hex)) {
      throw new IllegalArgumentException("object id must be 32 lowercase hex digits (an xxh3-128"
          + " digest) or 64 (a SHA-256), got: " + hex);
    }
  }

  /**
   * 32 or 64 lowercase hex digits. Checked by hand, not by a regex: a restart parses an id for
   * each of its 100,000 objects and calls.
   */
  public static boolean isValid(String hex) {
    if (hex == null || hex.length() != 32 && hex.length() != 64) {
      return false;
    }
    for (int i = 0; i < hex.length(); i++) {
      char c = hex.charAt(i);
      if (!(c >= '0' && c <= '9' || c >= 'a' && c <= 'f')) {
        return false;
      }
    }
    return true;
  }

  public static ObjectId parse(String hex) {
    return new ObjectId(hex);
  }

  @Override
  public String toString() {
    return hex;
  }
}
