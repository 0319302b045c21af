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
    for (Placed entry : users) {
      User user = entry.user();
      Placed first = byName.putIfAbsent(user.name(), entry);
      if (first != null) {
        errors.add(entry.path() + ".name", "'" + user.name() + "' has an entry already ("
            + first.path() + "); give each user one entry, with one group and one token");
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
