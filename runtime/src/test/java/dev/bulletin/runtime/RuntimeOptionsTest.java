package dev.bulletin.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.config.RuntimeConfig;
import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.WorkerOptions;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RuntimeOptionsTest {

  static final WorkerOptions WORKER = new WorkerOptions("w", Path.of("python3"),
      GpuInventory.none(), 1, 1L << 30, 0, 1_000, 0, WorkerOptions.DEFAULT_EXECUTOR_IDLE_MILLIS,
      Map.of());

  @Test
  void theBuilderFillsTheDefaultsOfTheCommandLineButAFreePort() {
    RuntimeOptions options = RuntimeOptions.builder(Path.of("/tmp/h"), WORKER).build();
    assertEquals("127.0.0.1", options.host());
    assertEquals(0, options.port());
    assertEquals(0, options.dataPort());
    assertEquals(1 << 20, options.inlineLimitBytes());
    assertEquals(60, options.drainMarginSeconds());
    assertEquals(60, options.ticketSeconds());
    assertEquals(RuntimeConfig.empty().users(), options.config().users());
  }

  @Test
  void eachWrongFieldIsNamed() {
    assertNamed("home", () -> RuntimeOptions.builder(null, WORKER).build());
    assertNamed("worker", () -> RuntimeOptions.builder(Path.of("/h"), null).build());
    assertNamed("port", () -> RuntimeOptions.builder(Path.of("/h"), WORKER).port(70_000).build());
    assertNamed("dataPort", () -> RuntimeOptions.builder(Path.of("/h"), WORKER).dataPort(-1)
        .build());
    assertNamed("host", () -> RuntimeOptions.builder(Path.of("/h"), WORKER).host(" ").build());
    assertNamed("ticketSeconds", () -> RuntimeOptions.builder(Path.of("/h"), WORKER)
        .ticketSeconds(0).build());
    assertNamed("inlineLimitBytes", () -> RuntimeOptions.builder(Path.of("/h"), WORKER)
        .inlineLimitBytes(-1).build());
    assertNamed("drainMarginSeconds", () -> RuntimeOptions.builder(Path.of("/h"), WORKER)
        .drainMarginSeconds(Double.NaN).build());
    assertNamed("config", () -> RuntimeOptions.builder(Path.of("/h"), WORKER).config(null)
        .build());
  }

  private static void assertNamed(String field, Runnable build) {
    IllegalArgumentException error = assertThrows(IllegalArgumentException.class, build::run);
    assertTrue(error.getMessage().startsWith(field + " "), error.getMessage());
  }
}
