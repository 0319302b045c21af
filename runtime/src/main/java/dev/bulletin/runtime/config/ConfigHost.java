package dev.bulletin.runtime.config;

import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.Optional;
import java.util.Set;

/**
 * What a config is checked against on the machine that reads it (besides its accounts, which
 * are looked up with {@link UnixAccounts}): the names the owner goes by, which no user may take,
 * and the executors' interpreter, which every {@code run_as} account must be able to run.
 *
 * @param ownerAccounts the owner's names: the Unix account the runtime runs as and the name
 *     {@code bulletin up} gives the owner ({@code BULLETIN_OWNER_USER})
 * @param interpreter the executors' Python ({@code --python}); empty: not checked, as when the
 *     runtime does not run as root and so runs no executor as another account
 */
public record ConfigHost(Set<String> ownerAccounts, Optional<Path> interpreter) {

  public ConfigHost {
    ownerAccounts = Set.copyOf(ownerAccounts);
    interpreter = interpreter == null ? Optional.empty() : interpreter;
  }

  /** This process's owner names ({@code user.name}, {@code BULLETIN_OWNER_USER}), no interpreter. */
  public static ConfigHost thisMachine() {
    Set<String> owner = new LinkedHashSet<>();
    owner.add(System.getProperty("user.name"));
    String named = System.getenv("BULLETIN_OWNER_USER"); // as the runtime's Main reads it
    if (named != null && !named.isBlank()) {
      owner.add(named.strip());
    }
    return new ConfigHost(owner, Optional.empty());
  }

  /** The same, checking that each run_as account can run {@code python} (null: not checked). */
  public ConfigHost withInterpreter(Path python) {
    return new ConfigHost(ownerAccounts, Optional.ofNullable(python));
  }
}
