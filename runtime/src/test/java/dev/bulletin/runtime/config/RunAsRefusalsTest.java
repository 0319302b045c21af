package dev.bulletin.runtime.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * users[].run_as checked against this machine's real accounts (issue 26): an account that does
 * not exist, root under any name, a system account (unless allow_system_accounts), one uid under
 * two names, a user named like the owner, and an interpreter the account cannot run. The
 * accounts of people (uid >= UID_MIN) and the aliases of one uid are made with useradd when the
 * tests run as root, and removed after; those tests are skipped otherwise.
 */
class RunAsRefusalsTest {
  static final ClusterTokens TOKENS = ClusterTokens.NONE;
  static final ConfigHost HOST = new ConfigHost(Set.of("ada"), Optional.empty());

  /** Accounts made here, removed after: a person's, another name of its uid, one of uid 0. */
  static String person;
  static String alias;
  static String rootAlias;
  static final List<String> MADE = new ArrayList<>();

  @TempDir Path folder;

  @BeforeAll
  static void makeAccounts() throws Exception {
    if (!UnixAccounts.processIsRoot() || !Files.isExecutable(Path.of("/usr/sbin/useradd"))) {
      return;
    }
    String tag = HexFormat.of().formatHex(randomBytes());
    person = make("btc" + tag, "--no-create-home", "--shell", "/usr/sbin/nologin");
    UnixAccounts.Account made = UnixAccounts.lookup(person).orElseThrow();
    alias = make("btc" + tag + "a", "--non-unique", "--uid", String.valueOf(made.uid()),
        "--no-user-group", "--gid", String.valueOf(made.gid()), "--no-create-home", "--shell",
        "/usr/sbin/nologin");
    rootAlias = make("btc" + tag + "r", "--non-unique", "--uid", "0", "--no-user-group",
        "--gid", "0", "--no-create-home", "--shell", "/usr/sbin/nologin");
  }

  private static byte[] randomBytes() {
    byte[] bytes = new byte[3];
    ThreadLocalRandom.current().nextBytes(bytes);
    return bytes;
  }

  /** useradd, retried a few times: another test may hold /etc/passwd's lock a moment. */
  private static String make(String name, String... options) throws Exception {
    List<String> command = new ArrayList<>(List.of("useradd"));
    command.addAll(List.of(options));
    command.add(name);
    for (int attempt = 0; ; attempt++) {
      Process useradd = new ProcessBuilder(command).redirectErrorStream(true).start();
      String output = new String(useradd.getInputStream().readAllBytes());
      if (useradd.waitFor(30, TimeUnit.SECONDS) && useradd.exitValue() == 0) {
        MADE.add(name);
        return name;
      }
      if (attempt == 4) {
        throw new IllegalStateException(command + " failed: " + output);
      }
      Thread.sleep(500);
    }
  }

  @AfterAll
  static void removeAccounts() throws Exception {
    // -f: the uid-0 alias shares its uid with every root process, which userdel would refuse.
    for (String name : MADE) {
      new ProcessBuilder("userdel", "-f", name).redirectErrorStream(true).start()
          .waitFor(30, TimeUnit.SECONDS);
    }
  }

  private static void assumeAccounts() {
    assumeTrue(person != null, "needs root and useradd to make accounts: skipped");
  }

  private static List<String> errors(String yaml, ConfigHost host) {
    ConfigException error = assertThrows(ConfigException.class,
        () -> RuntimeConfig.parse(yaml, null, TOKENS, host));
    return error.errors().stream().map(ConfigError::line).toList();
  }

  private static String only(String yaml) {
    List<String> errors = errors(yaml, HOST);
    assertEquals(1, errors.size(), errors.toString());
    return errors.get(0);
  }

  @Test
  void anAccountThisMachineDoesNotHaveIsRefused() {
    String error = only("""
        users: [{name: ann, token: ann-token-0123456789, run_as: bt-no-such-account}]
        """);
    assertEquals("users[0] (ann).run_as: 'bt-no-such-account' is not an account of this machine"
        + " (getent passwd bt-no-such-account finds none); create it (useradd --create-home"
        + " bt-no-such-account) or fix the name", error);
  }

  @Test
  void aSystemAccountIsRefusedUnlessTheFileAllowsThem() {
    int uidMin = UnixAccounts.firstUserUid();
    String error = only("""
        users: [{name: ann, token: ann-token-0123456789, run_as: daemon}]
        """);
    assertTrue(error.startsWith("users[0] (ann).run_as: 'daemon' is a system account (uid 1,"
        + " below UID_MIN " + uidMin + " of /etc/login.defs): that user's code would hold the"
        + " files and processes of the service it runs; give ann an account of their own"
        + " (useradd --create-home NAME), or, for an account made for bulletin (useradd"
        + " --system), set allow_system_accounts: true at the top of the file"), error);
    assertTrue(only("""
        users: [{name: ann, token: ann-token-0123456789, run_as: nobody}]
        """).startsWith("users[0] (ann).run_as: 'nobody' is uid 65534, the account that stands"
        + " for unknown users"));
    RuntimeConfig allowed = RuntimeConfig.parse("""
        allow_system_accounts: true
        users:
          - {name: ann, token: ann-token-0123456789, run_as: daemon}
          - {name: bob, token: bob-token-0123456789, run_as: nobody}
        """, null, TOKENS, HOST);
    assertEquals(Map.of("ann", "daemon", "bob", "nobody"), allowed.runAsAccounts());
  }

  @Test
  void allowSystemAccountsMustBeTrueOrFalse() {
    assertEquals("allow_system_accounts: expected true or false, got 'yes please'", only("""
        allow_system_accounts: yes please
        users: [{name: ann, token: ann-token-0123456789}]
        """));
  }

  @Test
  void rootUnderAnotherNameIsRefusedEvenWithAllowSystemAccounts() {
    assumeAccounts();
    String error = only("""
        allow_system_accounts: true
        users: [{name: ann, token: ann-token-0123456789, run_as: %s}]
        """.formatted(rootAlias));
    assertEquals("users[0] (ann).run_as: '" + rootAlias + "' is uid 0, root: that user's code"
        + " would have the whole machine; give ann an account of their own (useradd"
        + " --create-home NAME); allow_system_accounts does not allow root", error);
  }

  @Test
  void aPersonsAccountIsAccepted() {
    assumeAccounts();
    RuntimeConfig config = RuntimeConfig.parse("""
        users: [{name: ann, token: ann-token-0123456789, run_as: %s}]
        """.formatted(person), null, TOKENS, HOST);
    assertEquals(Map.of("ann", person), config.runAsAccounts());
  }

  @Test
  void oneAccountUnderTwoNamesIsRefused() {
    assumeAccounts();
    int uid = UnixAccounts.lookup(person).orElseThrow().uid();
    String error = only("""
        users:
          - {name: ann, token: ann-token-0123456789, run_as: %s}
          - {name: bob, token: bob-token-0123456789, run_as: %s}
        """.formatted(person, alias));
    assertEquals("users[1] (bob).run_as: '" + alias + "' is uid " + uid + ", the account of"
        + " users[0] (ann) (run_as: " + person + ") under another name: their executors could"
        + " read and signal each other's, and their store folders would be one; give each user"
        + " an account of their own", error);
  }

  @Test
  void aUserNamedLikeTheOwnerOrRootIsRefused() {
    List<String> errors = errors("""
        users:
          - {name: ada, token: ada-token-0123456789}
          - {name: root, token: root-token-0123456789}
        """, HOST);
    assertEquals(List.of("users[0] (ada).name: 'ada' is the owner's name (the runtime's account,"
        + " or BULLETIN_OWNER_USER: ada): this user would share the owner's objects and read as"
        + " the owner in status and usage; choose another name (the owner needs no entry:"
        + " `bulletin up` made their token)",
        "users[1] (root).name: 'root' is the superuser's name, which the runtime runs as (and"
        + " so is the owner) wherever run_as is in use: this user would share the owner's"
        + " objects and read as the owner in status and usage; choose another name (the owner"
        + " needs no entry: `bulletin up` made their token)"), errors);
    assertTrue(ConfigHost.thisMachine().ownerAccounts().contains(System.getProperty("user.name")));
  }

  @Test
  void anInterpreterTheAccountCannotReachIsRefusedNamingTheFolder() throws Exception {
    Path python = interpreterIn("closed", "rwx------");
    String error = only("""
        allow_system_accounts: true
        users: [{name: ann, token: ann-token-0123456789, run_as: daemon}]
        """, python);
    assertTrue(error.startsWith("users[0] (ann).run_as: 'daemon' cannot run the executors'"
        + " interpreter " + python + " (uid 1, groups "), error);
    assertTrue(error.contains("): the folder " + python.getParent() + " (mode 0700, owner "),
        error);
    assertTrue(error.endsWith(") is not searchable by it; install the interpreter (its venv)"
        + " where the account can reach it, e.g. under /opt, or chmod o+x "
        + python.getParent()), error);

    RuntimeConfig reachable = RuntimeConfig.parse("""
        allow_system_accounts: true
        users: [{name: ann, token: ann-token-0123456789, run_as: daemon}]
        """, null, TOKENS, HOST.withInterpreter(interpreterIn("open", "rwxr-xr-x")));
    assertEquals(Map.of("ann", "daemon"), reachable.runAsAccounts());
  }

  @Test
  void everyMistakeIsListedAtOnce() throws Exception {
    Path python = interpreterIn("closed", "rwx------");
    List<String> errors = errors("""
        users:
          - {name: ada, token: ada-token-0123456789}
          - {name: ann, token: ann-token-0123456789, run_as: bt-no-such-account}
          - {name: bob, token: bob-token-0123456789, run_as: daemon}
          - {name: admin, token: admin-token-0123456789}
        """, HOST.withInterpreter(python));
    assertEquals(4, errors.size(), errors.toString());
    assertTrue(errors.get(0).startsWith("users[3] (admin).name: 'admin' is the name of one of"
        + " bulletin's own roles"), errors.toString());
    assertTrue(errors.get(1).startsWith("users[0] (ada).name: 'ada' is the owner's name"),
        errors.toString());
    assertTrue(errors.get(2).startsWith("users[1] (ann).run_as: 'bt-no-such-account' is not an"
        + " account of this machine"), errors.toString());
    assertTrue(errors.get(3).startsWith("users[2] (bob).run_as: 'daemon' is a system account"),
        errors.toString());
  }

  private String only(String yaml, Path python) {
    List<String> errors = errors(yaml, HOST.withInterpreter(python));
    assertEquals(1, errors.size(), errors.toString());
    return errors.get(0);
  }

  /** A copy of /bin/true as {@code python}, in a folder of the given mode that others can reach. */
  private Path interpreterIn(String name, String mode) throws Exception {
    Files.setPosixFilePermissions(folder, PosixFilePermissions.fromString("rwxr-xr-x"));
    Path inside = Files.createDirectories(folder.resolve(name));
    Path python = inside.resolve("python");
    Files.copy(Path.of("/bin/true"), python);
    Files.setPosixFilePermissions(python, PosixFilePermissions.fromString("rwxr-xr-x"));
    Files.setPosixFilePermissions(inside, PosixFilePermissions.fromString(mode));
    return python;
  }
}
