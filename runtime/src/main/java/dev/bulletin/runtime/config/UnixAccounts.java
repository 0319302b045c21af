package dev.bulletin.runtime.config;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * This machine's Unix accounts, looked up by name, for the checks of {@code users[].run_as}
 * before anything runs as them. Java has no API for an account's uid and groups, hence {@code
 * getent passwd} and {@code id -G} (the worker's own UnixAccount does the same when it starts
 * an executor; it is not reachable from here, and the config must not wait for a call to find
 * a missing account).
 */
public final class UnixAccounts {
  /** Where the distribution says which uids are people's ({@code UID_MIN}). */
  static final Path LOGIN_DEFS = Path.of("/etc/login.defs");
  /** The first uid of a person's account where login.defs says nothing (Debian, Red Hat). */
  static final int DEFAULT_UID_MIN = 1000;
  /** The uid of {@code nobody}: the kernel's overflow uid, which stands for unknown users. */
  static final int OVERFLOW_UID = 65534;

  private static final Pattern UID_MIN = Pattern.compile("^\\s*UID_MIN\\s+(\\d+)\\s*(#.*)?$");
  // getent's exit status for "no such entry" (1: bad arguments, 3: database unsupported).
  private static final int GETENT_NOT_FOUND = 2;

  private UnixAccounts() {}

  /**
   * An account: its uid, primary gid, and every group it is in (the primary one included), as
   * the kernel checks a file's mode against them.
   */
  public record Account(String name, int uid, int gid, Set<Integer> groups) {
    public Account {
      groups = Set.copyOf(groups);
    }
  }

  /**
   * The account called {@code name}, or empty when this machine has none.
   *
   * @throws IllegalStateException when it cannot be told (no getent, or getent failed): the
   *     message says what was run and what it answered
   */
  public static Optional<Account> lookup(String name) {
    Output passwd = run("getent", "passwd", name);
    if (passwd.exit() == GETENT_NOT_FOUND) {
      return Optional.empty();
    }
    if (passwd.exit() != 0) {
      throw new IllegalStateException("getent passwd " + name + " failed (exit " + passwd.exit()
          + (passwd.text().isEmpty() ? "" : ": " + passwd.text()) + ")");
    }
    String[] fields = passwd.text().split("\n", 2)[0].split(":", -1);
    int uid;
    int gid;
    try {
      uid = Integer.parseInt(fields[2]);
      gid = Integer.parseInt(fields[3]);
    } catch (RuntimeException e) {
      throw new IllegalStateException("getent passwd " + name + " answered an entry that is not"
          + " name:password:uid:gid:...: " + passwd.text(), e);
    }
    return Optional.of(new Account(name, uid, gid, groups(name, gid)));
  }

  /**
   * The groups {@code id -G} lists for the account (its primary group and the supplementary
   * ones); the primary group alone when id cannot tell, which errs towards refusing.
   */
  private static Set<Integer> groups(String name, int gid) {
    Set<Integer> groups = new HashSet<>(List.of(gid));
    try {
      Output id = run("id", "-G", name);
      if (id.exit() == 0) {
        for (String group : id.text().trim().split("\\s+")) {
          groups.add(Integer.parseInt(group));
        }
      }
    } catch (RuntimeException e) {
      // Not fatal: the interpreter check then counts only the primary group.
    }
    return groups;
  }

  /** The first uid of a person's account: UID_MIN of /etc/login.defs, else 1000. */
  public static int firstUserUid() {
    return firstUserUid(LOGIN_DEFS);
  }

  /** UID_MIN in a login.defs file; {@value #DEFAULT_UID_MIN} when it is missing or unreadable. */
  static int firstUserUid(Path loginDefs) {
    try {
      for (String line : Files.readAllLines(loginDefs, StandardCharsets.UTF_8)) {
        Matcher matcher = UID_MIN.matcher(line);
        if (matcher.matches()) {
          return Integer.parseInt(matcher.group(1));
        }
      }
    } catch (IOException | RuntimeException e) {
      // No login.defs (a minimal container): the distributions' common default.
    }
    return DEFAULT_UID_MIN;
  }

  /** This process's uid, or -1 when it cannot be told. */
  public static int currentUid() {
    return dev.bulletin.bridge.UserFolder.currentUid();
  }

  /** Whether this process runs as root: only then are users' executors run as their run_as. */
  public static boolean processIsRoot() {
    return currentUid() == 0;
  }

  private record Output(int exit, String text) {}

  private static Output run(String... command) {
    try {
      Process process = new ProcessBuilder(command)
          .redirectError(ProcessBuilder.Redirect.DISCARD).start();
      String text = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8)
          .strip();
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        throw new IllegalStateException(String.join(" ", command) + " did not answer in 10 s");
      }
      return new Output(process.exitValue(), text);
    } catch (IOException e) {
      throw new IllegalStateException("cannot run " + command[0] + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while running " + String.join(" ", command),
          e);
    }
  }
}
