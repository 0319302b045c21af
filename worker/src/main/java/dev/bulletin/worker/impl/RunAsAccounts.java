package dev.bulletin.worker.impl;

import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.logging.Logger;

/**
 * The Unix accounts users' executors run as ({@code users[].run_as}), looked up once each, and
 * whether this agent can honour them at all (it runs as root).
 */
final class RunAsAccounts {

  private static final Logger LOG = Logger.getLogger(RunAsAccounts.class.getName());

  private final Map<String, UnixAccount> known = new ConcurrentHashMap<>();
  private final boolean root = UnixAccount.processIsRoot();
  private final Set<String> warned = ConcurrentHashMap.newKeySet();

  /**
   * The account a user's executors run as: their run_as when the agent can honour it, else null
   * (the agent's own, said once in the log).
   */
  UnixAccount of(Optional<String> runAs, String owner) throws ExecutorStartException {
    if (runAs.isEmpty()) {
      return null;
    }
    if (!root) {
      if (warned.add(runAs.get())) {
        LOG.warning("users[].run_as names account " + runAs.get() + " for " + owner + ", but"
            + " this worker does not run as root: that user's executors run as this worker's"
            + " own account");
      }
      return null;
    }
    UnixAccount account = known.get(runAs.get());
    if (account == null) {
      account = UnixAccount.lookup(runAs.get());
      known.put(account.name(), account);
    }
    return account;
  }
}
