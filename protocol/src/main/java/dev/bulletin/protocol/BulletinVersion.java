package dev.bulletin.protocol;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;

/**
 * The release version of every bulletin process, read from the POM (filtered into
 * {@code version.properties} at build time) so it is written in one place for Java; the Python
 * package's {@code _version.py} is checked against the same POM by its tests.
 */
public final class BulletinVersion {
  private static final String VERSION = load();

  private BulletinVersion() {}

  /** The version without Maven's {@code -SNAPSHOT} suffix, as the Python package spells it. */
  public static String get() {
    return VERSION;
  }

  private static String load() {
    Properties properties = new Properties();
    try (InputStream in = BulletinVersion.class.getResourceAsStream("version.properties")) {
      if (in == null) {
        throw new IllegalStateException("version.properties is missing from the protocol jar");
      }
      properties.load(in);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return properties.getProperty("version").replace("-SNAPSHOT", "");
  }
}
