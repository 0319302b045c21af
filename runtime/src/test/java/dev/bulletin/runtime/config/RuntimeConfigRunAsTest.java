package dev.bulletin.runtime.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** users[].run_as: the Unix account a user's executors run as (issue 12). */
class RuntimeConfigRunAsTest {
  @TempDir Path folder;

  private RuntimeConfig load(String yaml) throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, yaml);
    return RuntimeConfig.load(file);
  }

  @Test
  void aUserMayNameTheAccountTheirExecutorsRunAs() throws Exception {
    // daemon is on every machine; as a system account it takes allow_system_accounts (the
    // accounts of people, uid >= UID_MIN, are in RunAsRefusalsTest, which makes one).
    RuntimeConfig config = load("""
        allow_system_accounts: true
        users:
          - {name: ada, token: ada-token-0123456789, run_as: daemon}
          - {name: bob, token: bob-token-0123456789}
        """);
    assertEquals(Map.of("ada", "daemon"), config.runAsAccounts());
  }

  @Test
  void anAccountNameThatIsNoneOrRootIsRefusedNamingTheField() {
    IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> load("""
        users:
          - {name: ada, token: ada-token-0123456789, run_as: "ada; rm -rf /"}
        """));
    assertTrue(bad.getMessage().contains("users[0] (ada).run_as: must be a Unix account name"),
        bad.getMessage());
    IllegalArgumentException root = assertThrows(IllegalArgumentException.class, () -> load("""
        users:
          - {name: ada, token: ada-token-0123456789, run_as: root}
        """));
    assertTrue(root.getMessage().contains("users[0] (ada).run_as: must not be root"),
        root.getMessage());
  }
}
