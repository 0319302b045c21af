package dev.bulletin.runtime.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RuntimeConfigPolicyTest {
  @TempDir Path folder;

  @Test
  void usersAndPolicySectionsLiveInOneFile() throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, """
        users:
          - name: carl
            group: nlp
            token: carl-token-0123456789
        groups:
          nlp: {gpus: 8}
        limits:
          intern: {gpus: 1, users: [carl]}
        """);
    RuntimeConfig config = RuntimeConfig.load(file);
    assertEquals("nlp", config.users().get(0).group());
    assertEquals(8, config.policy().group("nlp").maxGpus());
    assertEquals("intern", config.policy().limitFor("carl").name());
  }

  @Test
  void aFileWithoutPolicyHasTheDefaults() throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, "users: []\n");
    assertEquals(PolicyConfig.defaults(), RuntimeConfig.load(file).policy());
    assertEquals(PolicyConfig.defaults(), RuntimeConfig.empty().policy());
  }

  @Test
  void policyErrorsNameTheFileAndTheField() throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, "qos:\n  batch: {max_walltime: forever}\n");
    IllegalArgumentException error =
        assertThrows(IllegalArgumentException.class, () -> RuntimeConfig.load(file));
    assertTrue(error.getMessage().startsWith("config file " + file
        + ": qos.batch.max_walltime: 'forever' is not a duration; use a number with a unit"),
        error.getMessage());
  }

  @Test
  void unknownTopLevelFieldsListEverySection() throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, "quotas: {}\n");
    IllegalArgumentException error =
        assertThrows(IllegalArgumentException.class, () -> RuntimeConfig.load(file));
    assertTrue(error.getMessage().endsWith("unknown field 'quotas' (allowed: users,"
        + " allow_system_accounts, pools, qos, groups, limits, scheduler)"), error.getMessage());
  }
}
