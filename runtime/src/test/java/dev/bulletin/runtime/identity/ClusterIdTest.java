package dev.bulletin.runtime.identity;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ClusterIdTest {

  @TempDir Path home;

  @Test
  void theIdSurvivesARestartAndDiffersBetweenHomes() throws Exception {
    String id = ClusterId.loadOrCreate(home);
    assertTrue(id.matches("[a-z0-9]{8}"), id);
    assertEquals(id, ClusterId.loadOrCreate(home));
    assertNotEquals(id, ClusterId.loadOrCreate(home.resolve("other")));
    try (var files = Files.list(home)) {
      assertEquals(2, files.count(), "no temporary files left: cluster_id and other/");
    }
  }

  @Test
  void aDamagedFileIsNamed() throws Exception {
    Files.writeString(home.resolve(ClusterId.FILE), "not an id");
    IllegalStateException error = assertThrows(IllegalStateException.class, () -> ClusterId.loadOrCreate(home));
    assertTrue(error.getMessage().contains("cluster_id holds 'not an id'"), error.getMessage());
  }
}
