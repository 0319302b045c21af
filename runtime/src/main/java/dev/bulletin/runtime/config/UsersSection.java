package dev.bulletin.runtime.config;

import dev.bulletin.runtime.config.RuntimeConfig.User;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The {@code users:} section: who may use the cluster, with which token and in which group. Its
 * checks refuse every entry that would hand one person's rights to another.
 */
final class UsersSection {
  /**
   * Names of the cluster's own identities and roles: the owner, admins, the worker agents
   * (Identity.workerAgent() is "bulletin-worker") and the metrics scraper. A user by one of
   * them would read as that role in status, usage and logs.
   */
  static final List<String> ROLE_NAMES =
      List.of("owner", "admin", "bulletin-worker", "worker", "metrics");

  private UsersSection() {}

  /** A user with the path of its entry ({@code users[1] (bob)}), for errors that name it. */
  record Placed(String path, User user) {}

  static List<Placed> read(ConfigNode root) {
    List<Placed> users = new ArrayList<>();
    for (ConfigNode entry : root.list("users", "users (each starting with '- name: ...')")) {
      Optional<String> name = entry.requiredString("name", "ada");
      Optional<String> group = entry.string("group");
      Optional<String> token = entry.requiredString("token", "a random string made with: "
          + User.MAKE_A_TOKEN);
      boolean admin = entry.bool("admin", false);
      Optional<String> runAs = entry.string("run_as");
      entry.rejectUnknown();
      entry.build(() -> new User(name.orElseThrow(), group.orElse(null), token.orElseThrow(),
              admin, runAs.orElse(null)))
          .ifPresent(user -> users.add(new Placed(entry.path(), user)));
    }
    return users;
  }

  /** Users built in code, with the paths their entries would have in a file. */
  static List<Placed> placed(List<User> users) {
    List<Placed> placed = new ArrayList<>();
    for (int i = 0; i < users.size(); i++) {
      placed.add(new Placed("users[" + i + "] (" + users.get(i).name() + ")", users.get(i)));
    }
    return placed;
  }

  /**
   * The checks across entries, each mistake added with the field it is about.
   *
   * @param policy the file's policy, for the groups; null when it had mistakes of its own
   */
  static void check(List<Placed> users, PolicyConfig policy, ClusterTokens tokens,
      ConfigErrors errors) {
    Map<String, Placed> byName = new HashMap<>();
    Map<String, Placed> byToken = new HashMap<>();
    Map<String, Placed> byRunAs = new HashMap<>();
    for (Placed entry : users) {
      User user = entry.user();
      Placed first = byName.putIfAbsent(user.name(), entry);
      if (first != null) {
        errors.add(entry.path() + ".name", "'" + user.name() + "' has an entry already ("
            + first.path() + "); give each user one entry, with one group and one token");
      }
      if (ROLE_NAMES.contains(user.name())) {
        errors.add(entry.path() + ".name", "'" + user.name() + "' is the name of one of bulletin's"
            + " own roles (" + String.join(", ", ROLE_NAMES) + "): this user would read as that"
            + " role in status, usage and logs; choose another name (an admin is a user with"
            + " admin: true)");
      }
      Placed accountOf = user.runAs() == null ? null : byRunAs.putIfAbsent(user.runAs(), entry);
      if (accountOf != null) {
        errors.add(entry.path() + ".run_as", "'" + user.runAs() + "' is " + accountOf.path()
            + "'s account too: their executors could read and signal each other's, and their"
            + " store folders would be one; give each user an account of their own");
      }
      Placed sharing = byToken.putIfAbsent(user.token(), entry);
      if (sharing != null) {
        errors.add(entry.path() + ".token", "is " + sharing.path() + "'s token too; every user"
            + " needs a token of their own (make one with: " + User.MAKE_A_TOKEN + ")");
      }
      if (user.token().equals(tokens.owner())) {
        errors.add(entry.path() + ".token", "is the owner's token (BULLETIN_OWNER_TOKEN): whoever"
            + " holds it is the owner; give " + user.name() + " a token of their own (make one"
            + " with: " + User.MAKE_A_TOKEN + ")");
      }
      if (user.token().equals(tokens.worker())) {
        errors.add(entry.path() + ".token", "is the workers' token (BULLETIN_WORKER_TOKEN): whoever"
            + " holds it can attach a worker and be sent other users' calls; give " + user.name()
            + " a token of their own (make one with: " + User.MAKE_A_TOKEN + ")");
      }
      checkGroup(entry, policy, errors);
    }
    for (Placed entry : users) {
      checkCrossed(entry, byName, errors);
    }
  }

  /**
   * Users crossed onto each other's accounts: alice's run_as is 'bob', the name of the user bob,
   * whose executors run as an account of his own. The names then say the opposite of who runs
   * as which account (bob's calls are not 'bob''s, alice's are), which is how a wrong file and a
   * wrong audit go unnoticed. A run_as named like a user without one of their own is allowed:
   * that user's executors run as the runtime's account, not as the one named like them.
   */
  private static void checkCrossed(Placed entry, Map<String, Placed> byName, ConfigErrors errors) {
    String account = entry.user().runAs();
    Placed named = account == null ? null : byName.get(account);
    if (named == null || named == entry || named.user().runAs() == null
        || named.user().runAs().equals(account)) { // one account twice: its own error above
      return;
    }
    errors.add(entry.path() + ".run_as", "'" + account + "' is the name of the user "
        + named.path() + ", whose executors run as '" + named.user().runAs() + "': "
        + entry.user().name() + "'s calls would run as an account that reads as " + account
        + "'s; give " + entry.user().name() + " an account named for them, or for no other user");
  }

  /**
   * Once {@code groups:} sets quotas, a group it does not name has none: a misspelt group would
   * free its users from their quota, so it must be named there (with {@code {}} for no quota).
   */
  private static void checkGroup(Placed entry, PolicyConfig policy, ConfigErrors errors) {
    String group = entry.user().group();
    if (policy == null || policy.groups().isEmpty() || group.equals(RuntimeConfig.DEFAULT_GROUP)
        || policy.groups().containsKey(group)) {
      return;
    }
    errors.add(entry.path() + ".group", "'" + group + "' is not in groups: (known: "
        + String.join(", ", policy.groups().keySet().stream().sorted().toList())
        + "); fix the name, or add '" + group + ": {}' to groups: for a group without quota");
  }
}
