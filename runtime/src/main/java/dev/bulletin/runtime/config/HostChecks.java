package dev.bulletin.runtime.config;

import dev.bulletin.runtime.config.RuntimeConfig.User;
import dev.bulletin.runtime.config.UnixAccounts.Account;
import dev.bulletin.runtime.config.UsersSection.Placed;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The checks of the {@code users:} section against the machine that reads it: each {@code
 * run_as} must be an account of this machine, of a person (not root, not a system account unless
 * {@code allow_system_accounts: true}), no other user's under another name, and able to run the
 * executors' interpreter; and no user may take the owner's name. They run when a file is read
 * ({@code bulletin up}, {@code check-config}), not for configs built in code.
 */
final class HostChecks {
  static final String ALLOW_SYSTEM_ACCOUNTS = "allow_system_accounts";

  private HostChecks() {}

  /**
   * Adds every mistake, each on the field it is about.
   *
   * @param allowSystemAccounts the file's {@code allow_system_accounts}: uids below UID_MIN (and
   *     {@code nobody}) are then accepted; root never is
   */
  static void check(Iterable<Placed> users, ConfigHost host, boolean allowSystemAccounts,
      ConfigErrors errors) {
    int uidMin = UnixAccounts.firstUserUid();
    Map<Integer, Placed> byUid = new HashMap<>();
    for (Placed entry : users) {
      User user = entry.user();
      checkName(entry, host, errors);
      if (user.runAs() == null) {
        continue;
      }
      String field = entry.path() + ".run_as";
      Optional<Account> found;
      try {
        found = UnixAccounts.lookup(user.runAs());
      } catch (IllegalStateException e) {
        errors.add(field, "'" + user.runAs() + "' cannot be looked up on this machine ("
            + e.getMessage() + "); run_as needs getent (glibc) to find the account");
        continue;
      }
      if (found.isEmpty()) {
        errors.add(field, "'" + user.runAs() + "' is not an account of this machine (getent passwd"
            + " " + user.runAs() + " finds none); create it (useradd --create-home "
            + user.runAs() + ") or fix the name");
        continue;
      }
      Account account = found.get();
      if (!checkUid(entry, account, uidMin, allowSystemAccounts, errors)) {
        continue;
      }
      Placed sharing = byUid.putIfAbsent(account.uid(), entry);
      // The same name twice is UsersSection's error already; here, two names of one uid.
      if (sharing != null && !sharing.user().runAs().equals(user.runAs())) {
        errors.add(field, "'" + user.runAs() + "' is uid " + account.uid() + ", the account of "
            + sharing.path() + " (run_as: " + sharing.user().runAs() + ") under another name:"
            + " their executors could read and signal each other's, and their store folders"
            + " would be one; give each user an account of their own");
      }
      host.interpreter().flatMap(python -> InterpreterAccess.blocker(python, account))
          .ifPresent(why -> errors.add(field, "'" + user.runAs() + "' cannot run the executors'"
              + " interpreter " + host.interpreter().get() + " (uid " + account.uid()
              + ", groups " + account.groups().stream().sorted().toList() + "): " + why));
    }
  }

  /**
   * The owner has their own token and identity; a user by their name would share the owner's
   * store namespace and read as the owner in status, usage and logs. {@code root} is refused
   * too, whoever reads the file: the runtime runs as root wherever run_as is in use.
   */
  private static void checkName(Placed entry, ConfigHost host, ConfigErrors errors) {
    String name = entry.user().name();
    String why = host.ownerAccounts().contains(name)
        ? "is the owner's name (the runtime's account, or BULLETIN_OWNER_USER: "
            + String.join(", ", host.ownerAccounts().stream().sorted().toList()) + ")"
        : name.equals("root") ? "is the superuser's name, which the runtime runs as (and so"
            + " is the owner) wherever run_as is in use" : null;
    if (why != null) {
      errors.add(entry.path() + ".name", "'" + name + "' " + why + ": this user would share the"
          + " owner's objects and read as the owner in status and usage; choose another name"
          + " (the owner needs no entry: `bulletin up` made their token)");
    }
  }

  /**
   * Root would give that user's code the whole machine; a system account holds the files and
   * processes of a service (daemon, www-data...), which that user's code would then hold too;
   * nobody (the overflow uid) stands for every unknown user of NFS and user namespaces.
   *
   * @return whether the account may be used
   */
  private static boolean checkUid(Placed entry, Account account, int uidMin,
      boolean allowSystemAccounts, ConfigErrors errors) {
    String field = entry.path() + ".run_as";
    String name = "'" + account.name() + "'";
    String fix = "; give " + entry.user().name() + " an account of their own (useradd"
        + " --create-home NAME), or, for an account made for bulletin (useradd --system), set "
        + ALLOW_SYSTEM_ACCOUNTS + ": true at the top of the file";
    if (account.uid() == 0) {
      errors.add(field, name + " is uid 0, root: that user's code would have the whole machine;"
          + " give " + entry.user().name() + " an account of their own (useradd --create-home"
          + " NAME); " + ALLOW_SYSTEM_ACCOUNTS + " does not allow root");
      return false;
    }
    if (allowSystemAccounts) {
      return true;
    }
    if (account.uid() < uidMin) {
      errors.add(field, name + " is a system account (uid " + account.uid() + ", below UID_MIN "
          + uidMin + " of " + UnixAccounts.LOGIN_DEFS + "): that user's code would hold the"
          + " files and processes of the service it runs" + fix);
      return false;
    }
    if (account.uid() == UnixAccounts.OVERFLOW_UID) {
      errors.add(field, name + " is uid " + UnixAccounts.OVERFLOW_UID + ", the account that"
          + " stands for unknown users (NFS, user namespaces) and that services share" + fix);
      return false;
    }
    return true;
  }
}
