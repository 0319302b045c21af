package dev.bulletin.runtime.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** Config mistakes that would grant one person another's rights are refused, naming the field. */
class UsersConfigTest {

  static final String OWNER = "owner-token-0123456789";
  static final String WORKER = "worker-token-0123456789";
  static final ClusterTokens TOKENS = new ClusterTokens(OWNER, WORKER);

  private static List<String> errors(String yaml) {
    ConfigException error = assertThrows(ConfigException.class,
        () -> RuntimeConfig.parse(yaml, null, TOKENS));
    return error.errors().stream().map(ConfigError::line).toList();
  }

  static Stream<Arguments> refusals() {
    return Stream.of(
        Arguments.of("a user holding the owner's token", """
            users: [{name: bob, token: owner-token-0123456789}]
            """, "users[0] (bob).token: is the owner's token (BULLETIN_OWNER_TOKEN): whoever holds"
            + " it is the owner; give bob a token of their own"),
        Arguments.of("a user holding the workers' token", """
            users: [{name: bob, token: worker-token-0123456789}]
            """, "users[0] (bob).token: is the workers' token (BULLETIN_WORKER_TOKEN): whoever"
            + " holds it can attach a worker and be sent other users' calls"),
        Arguments.of("the same name twice, even with other groups", """
            users:
              - {name: ann, group: nlp, token: ann-token-0123456789}
              - {name: ann, group: vision, token: ann-other-token-0123456789}
            """, "users[1] (ann).name: 'ann' has an entry already (users[0] (ann)); give each"
            + " user one entry, with one group and one token"),
        Arguments.of("two users with one token", """
            users:
              - {name: ann, token: shared-token-0123456789}
              - {name: bob, token: shared-token-0123456789}
            """, "users[1] (bob).token: is users[0] (ann)'s token too; every user needs a token of"
            + " their own"),
        Arguments.of("users that is not a list", """
            users: {name: ann, token: ann-token-0123456789}
            """, "users: must be a list of users (each starting with '- name: ...'), got a mapping"),
        Arguments.of("an empty token", """
            users: [{name: ann, token: ""}]
            """, "users[0] (ann).token: is required (for example: a random string made with:"
            + " python -c 'import secrets; print(secrets.token_urlsafe(32))')"),
        Arguments.of("a short token", """
            users: [{name: ann, token: short}]
            """, "users[0] (ann).token: must be at least 16 characters"),
        Arguments.of("no name", """
            users: [{token: ann-token-0123456789}]
            """, "users[0].name: is required (for example: ada)"),
        Arguments.of("a group that groups: does not name", """
            users: [{name: ann, group: visoin, token: ann-token-0123456789}]
            groups: {vision: {gpus: 4}, nlp: {gpus: 2}}
            """, "users[0] (ann).group: 'visoin' is not in groups: (known: nlp, vision); fix the"
            + " name, or add 'visoin: {}' to groups: for a group without quota"),
        Arguments.of("a user named like a bulletin role", """
            users: [{name: bulletin-worker, token: ann-token-0123456789}]
            """, "users[0] (bulletin-worker).name: 'bulletin-worker' is the name of one of"
            + " bulletin's own roles (owner, admin, bulletin-worker, worker, metrics): this user"
            + " would read as that role in status, usage and logs; choose another name"),
        Arguments.of("one account for two users", """
            allow_system_accounts: true
            users:
              - {name: ann, token: ann-token-0123456789, run_as: daemon}
              - {name: bob, token: bob-token-0123456789, run_as: daemon}
            """, "users[1] (bob).run_as: 'daemon' is users[0] (ann)'s account too: their"
            + " executors could read and signal each other's, and their store folders would be"
            + " one; give each user an account of their own"),
        Arguments.of("a user on the account named like another user, who has one of their own",
            """
            allow_system_accounts: true
            users:
              - {name: ann, token: ann-token-0123456789, run_as: daemon}
              - {name: daemon, token: daemon-token-0123456789, run_as: bin}
            """, "users[0] (ann).run_as: 'daemon' is the name of the user users[1] (daemon), whose"
            + " executors run as 'bin': ann's calls would run as an account that reads as"
            + " daemon's; give ann an account named for them, or for no other user"),
        Arguments.of("a typo in a user's field", """
            users: [{name: ann, grop: nlp, token: ann-token-0123456789}]
            """, "users[0] (ann): unknown field 'grop' (allowed: name, group, token, admin, run_as)"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("refusals")
  void refusedNamingTheField(String name, String yaml, String expected) {
    List<String> errors = errors(yaml);
    assertEquals(1, errors.size(), errors.toString());
    assertTrue(errors.get(0).startsWith(expected), errors.get(0));
  }

  @Test
  void aFileWithThreeMistakesGetsThreeMessages() {
    List<String> errors = errors("""
        users:
          - {name: ann, group: nlp, token: ann-token-0123456789}
          - {name: ann, group: vision, token: ann-second-token-0123}
          - {name: eve, token: owner-token-0123456789}
        pools:
          - {name: gpu, provider: local, worker: {gpus: 1}, max_workers: 2, idle_timeout: soon}
        """);
    assertEquals(3, errors.size(), errors.toString());
    assertTrue(errors.get(0).startsWith("pools[0] (gpu).idle_timeout: 'soon' is not a duration"),
        errors.toString());
    assertTrue(errors.get(1).startsWith("users[1] (ann).name: 'ann' has an entry already"),
        errors.toString());
    assertTrue(errors.get(2).startsWith("users[2] (eve).token: is the owner's token"),
        errors.toString());
  }

  @Test
  void theMessageListsEveryErrorUnderTheFile() {
    ConfigException error = assertThrows(ConfigException.class, () -> RuntimeConfig.parse("""
        users: [{name: a, token: x}, {name: b, token: y}]
        """, "config file x.yaml", TOKENS));
    assertTrue(error.getMessage().startsWith("config file x.yaml: 2 errors:\n  users[0] (a).token:"
        + " must be at least 16 characters"), error.getMessage());
    assertTrue(error.getMessage().contains("\n  users[1] (b).token: must be at least 16"),
        error.getMessage());
  }

  @Test
  void validUsersStayAsTheyWere() {
    RuntimeConfig config = RuntimeConfig.parse("""
        users:
          - {name: ann, group: nlp, token: ann-token-0123456789}
          - {name: bob, token: bob-token-0123456789}
          - {name: ivy, group: interns, token: ivy-token-0123456789}
        """, null, TOKENS);
    assertEquals(List.of(new RuntimeConfig.User("ann", "nlp", "ann-token-0123456789"),
        new RuntimeConfig.User("bob", "default", "bob-token-0123456789"),
        new RuntimeConfig.User("ivy", "interns", "ivy-token-0123456789")), config.users());
  }

  @Test
  void groupsAreCheckedOnlyOnceGroupsSetQuotasAndDefaultNeedsNoEntry() {
    RuntimeConfig config = RuntimeConfig.parse("""
        users:
          - {name: ann, group: nlp, token: ann-token-0123456789}
          - {name: bob, token: bob-token-0123456789}
        groups: {nlp: {gpus: 2}}
        """, null, TOKENS);
    assertEquals(2, config.policy().group("nlp").maxGpus());
  }

  @Test
  void usersCrossedOntoEachOthersAccountsAreBothRefused() {
    List<String> errors = errors("""
        allow_system_accounts: true
        users:
          - {name: daemon, token: ann-token-0123456789, run_as: bin}
          - {name: bin, token: bob-token-0123456789, run_as: daemon}
        """);
    assertEquals(2, errors.size(), errors.toString());
    assertTrue(errors.get(0).startsWith("users[0] (daemon).run_as: 'bin' is the name of the user"
        + " users[1] (bin), whose executors run as 'daemon'"), errors.toString());
    assertTrue(errors.get(1).startsWith("users[1] (bin).run_as: 'daemon' is the name of the user"
        + " users[0] (daemon), whose executors run as 'bin'"), errors.toString());
  }

  @Test
  void anAccountNamedLikeAUserWithoutOneOfTheirOwnIsAllowed() {
    // bob's executors run as the runtime's account: ann on the account 'bob' crosses nobody.
    RuntimeConfig config = RuntimeConfig.parse("""
        allow_system_accounts: true
        users:
          - {name: ann, token: ann-token-0123456789, run_as: daemon}
          - {name: daemon, token: bob-token-0123456789}
        """, null, TOKENS);
    assertEquals(java.util.Map.of("ann", "daemon"), config.runAsAccounts());
  }

  @Test
  void usersBuiltInCodeAreCheckedForRolesAndSharedAccountsToo() {
    IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
        () -> new RuntimeConfig(List.of(
            new RuntimeConfig.User("metrics", null, "metrics-token-0123456789"),
            new RuntimeConfig.User("a", null, "a-token-0123456789", false, "lab"),
            new RuntimeConfig.User("b", null, "b-token-0123456789", false, "lab"))));
    assertTrue(error.getMessage().startsWith("2 errors:\n  users[0] (metrics).name: 'metrics' is"
        + " the name of one of bulletin's own roles"), error.getMessage());
    assertTrue(error.getMessage().contains("\n  users[2] (b).run_as: 'lab' is users[1] (a)'s"
        + " account too"), error.getMessage());
  }

  @Test
  void usersBuiltInCodeAreCheckedToo() {
    IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
        () -> new RuntimeConfig(List.of(
            new RuntimeConfig.User("a", null, "same-token-0123456789"),
            new RuntimeConfig.User("b", null, "same-token-0123456789"))));
    assertTrue(error.getMessage().startsWith("users[1] (b).token: is users[0] (a)'s token too"),
        error.getMessage());
  }
}
