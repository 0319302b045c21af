package dev.bulletin.worker.impl;

import dev.bulletin.worker.GpuInventory;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Finds the host's GPUs with {@code nvidia-smi}; a host without it has none. */
public final class NvidiaSmi {
  private NvidiaSmi() {}

  /** {@code nvidia-smi topo -m}, or empty when it cannot say. */
  private static String topology() throws IOException, InterruptedException {
    Process process = new ProcessBuilder("nvidia-smi", "topo", "-m").redirectErrorStream(true)
        .start();
    if (!process.waitFor(10, TimeUnit.SECONDS) || process.exitValue() != 0) {
      process.destroyForcibly();
      return "";
    }
    return new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
  }

  public static GpuInventory detect() {
    try {
      Process process = new ProcessBuilder(
          "nvidia-smi", "--query-gpu=name", "--format=csv,noheader").redirectErrorStream(true).start();
      if (!process.waitFor(10, TimeUnit.SECONDS) || process.exitValue() != 0) {
        process.destroyForcibly();
        return GpuInventory.none();
      }
      String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      List<String> names = out.lines().map(String::strip).filter(s -> !s.isEmpty()).toList();
      return new GpuInventory(names, false, topology());
    } catch (IOException e) {
      return GpuInventory.none(); // no nvidia-smi on PATH
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return GpuInventory.none();
    }
  }
}
