package dev.bulletin.bridge.impl;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Reading a store's owner from its marker (killed owners: AbandonedStoresTest). */
class StoreOwnerTest {

  @TempDir Path folder;

  boolean gone(String marker) throws Exception {
    Path file = folder.resolve(FileObjectStore.MARKER);
    Files.writeString(file, marker);
    return StoreOwner.ownerGone(file);
  }

  @Test
  void aLiveOwnerIsNotGoneButItsPidUnderAnotherStartIs() throws Exception {
    ProcessHandle self = ProcessHandle.current();
    long start = self.info().startInstant().map(Instant::toEpochMilli).orElseThrow();
    assertFalse(gone(StoreOwner.current()));
    assertFalse(gone(StoreOwner.format(self.pid(), start)));
    assertTrue(gone(StoreOwner.format(self.pid(), start - 60_000)),
        "the pid was reused: the store's owner is gone");
  }

  @Test
  void aMarkerThatNamesNoOwnerKeepsTheStore() throws Exception {
    assertFalse(gone(""));
    assertFalse(gone("pid=notanumber start=1"));
    assertFalse(gone("start=1"));
  }
}
