package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class ExitCausesTest {
  @Test
  void signalsAreNamedAndTheOomKillerIsSuspectedForSigkill() {
    assertTrue(ExitCauses.describe(137).contains("SIGKILL"));
    assertTrue(ExitCauses.describe(137).contains("out-of-memory"));
    assertTrue(ExitCauses.describe(139).contains("SIGSEGV"));
  }

  @Test
  void plainExitStatusesAreReported() {
    assertTrue(ExitCauses.describe(3).startsWith("exited with status 3"));
    assertEquals("exited with status 0", ExitCauses.describe(0));
  }
}
