package dev.bulletin.bridge;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.regex.Pattern;

/** The name of an object in a store: the lowercase hex SHA-256 of its bytes. */
public record ObjectId(String hex) {

  private static final Pattern HEX_SHA256 = Pattern.compile("[0-9a-f]{64}");

  public ObjectId {
    if (hex == null || !HEX_SHA256.matcher(hex).matches()) {
      throw new IllegalArgumentException(
          "object id must be 64 lowercase hex digits (a SHA-256), got: " + hex);
    }
  }

  public static ObjectId parse(String hex) {
    return new ObjectId(hex);
  }

  public static ObjectId of(byte[] bytes) {
    return of(ByteBuffer.wrap(bytes));
  }

  public static ObjectId of(ByteBuffer bytes) {
    MessageDigest digest = sha256();
    digest.update(bytes.duplicate());
    return new ObjectId(HexFormat.of().formatHex(digest.digest()));
  }

  static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK ships SHA-256", e);
    }
  }

  /** Hashes bytes as they arrive, for uploads that come in chunks. */
  public static final class Hasher {
    private final MessageDigest digest = sha256();

    public void update(ByteBuffer chunk) {
      digest.update(chunk.duplicate());
    }

    public ObjectId finish() {
      return new ObjectId(HexFormat.of().formatHex(digest.digest()));
    }
  }

  @Override
  public String toString() {
    return hex;
  }
}
