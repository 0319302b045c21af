package dev.bulletin.runtime.identity;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.config.RuntimeConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenRegistryTest {

  @TempDir Path folder;

  @Test
  void ownerTokenMapsToTheOwnerAndUnknownTokensAreRefused() {
    TokenRegistry registry = TokenRegistry.of("owner-token-0123456789", "ada", RuntimeConfig.empty());
    assertEquals(Optional.of(new Identity("ada", "default", true)),
        registry.authenticate("Bearer owner-token-0123456789"));
    assertEquals(Optional.empty(), registry.authenticate("Bearer made-up"));
    assertEquals(Optional.empty(), registry.authenticate("owner-token-0123456789"));
    assertEquals(Optional.empty(), registry.authenticate(null));
  }

  @Test
  void theWorkerTokenIsAWorkerAndNoUser() {
    TokenRegistry registry = TokenRegistry.of("owner-token-0123456789", "ada",
        "worker-token-0123456789", RuntimeConfig.empty());
    Identity worker = registry.authenticate("Bearer worker-token-0123456789").orElseThrow();
    assertTrue(worker.worker());
    assertTrue(!registry.authenticate("Bearer owner-token-0123456789").orElseThrow().worker());
    IllegalArgumentException shared = assertThrows(IllegalArgumentException.class,
        () -> TokenRegistry.of("same-token-0123456789", "ada", "same-token-0123456789",
            RuntimeConfig.empty()));
    assertTrue(shared.getMessage().contains("BULLETIN_WORKER_TOKEN"), shared.getMessage());
  }

  @Test
  void configUsersGetTheirGroups() throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, """
        users:
          - name: grace
            group: vision
            token: grace-token-0123456789
          - name: intern
            token: intern-token-0123456789
        """);
    TokenRegistry registry = TokenRegistry.of(null, "root", RuntimeConfig.load(file));
    assertEquals(Optional.of(new Identity("grace", "vision", false)),
        registry.authenticate("Bearer grace-token-0123456789"));
    assertEquals("default", registry.authenticate("Bearer intern-token-0123456789").orElseThrow().group());
  }

  @Test
  void unknownConfigFieldsAreNamed() throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, "userz: []\n");
    IllegalArgumentException error =
        assertThrows(IllegalArgumentException.class, () -> RuntimeConfig.load(file));
    assertTrue(error.getMessage().contains("unknown field 'userz'"), error.getMessage());
  }

  @Test
  void aUserHoldingTheOwnersTokenIsRefusedNotMadeTheOwner() {
    RuntimeConfig config = new RuntimeConfig(List.of(
        new RuntimeConfig.User("bob", null, "owner-token-0123456789")));
    IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
        () -> TokenRegistry.of("owner-token-0123456789", "ada", config));
    assertTrue(error.getMessage().startsWith("users[0] (bob).token: is the owner's token"
        + " (BULLETIN_OWNER_TOKEN)"), error.getMessage());
  }

  @Test
  void aUserHoldingTheWorkersTokenIsRefused() {
    RuntimeConfig config = new RuntimeConfig(List.of(
        new RuntimeConfig.User("bob", null, "worker-token-0123456789")));
    IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
        () -> TokenRegistry.of("owner-token-0123456789", "ada", "worker-token-0123456789", config));
    assertTrue(error.getMessage().startsWith("users[0] (bob).token: is the workers' token"
        + " (BULLETIN_WORKER_TOKEN)"), error.getMessage());
  }
}
