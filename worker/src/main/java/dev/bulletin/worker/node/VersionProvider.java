package dev.bulletin.worker.node;

import dev.bulletin.protocol.BulletinVersion;
import picocli.CommandLine.IVersionProvider;

/** {@code --version} of the bulletin commands (the runtime's and the worker's). */
public final class VersionProvider implements IVersionProvider {
  @Override
  public String[] getVersion() {
    return new String[] {"bulletin " + BulletinVersion.get()};
  }
}
