package dev.bulletin.worker.impl;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.logging.Logger;

/**
 * Real GPUs: {@code nvidia-smi --query-gpu=index,uuid,utilization.gpu} (NVML's "percent of time
 * over the past sample period during which one or more kernels was executing"). One short
 * process per sample, taken only while a call holds a GPU; a failed sample counts as idle and
 * is logged once.
 */
final class NvidiaSmiUtilisation implements UtilisationSource {
  private static final Logger LOG = Logger.getLogger(NvidiaSmiUtilisation.class.getName());
  private final String executable;
  private boolean warned;

  /** @param executable "nvidia-smi" (found on PATH), or a path */
  NvidiaSmiUtilisation(String executable) {
    this.executable = executable;
  }

  @Override
  public Map<Integer, Double> sample(Collection<Holder> holders) {
    try {
      Process process = new ProcessBuilder(executable, "--query-gpu=index,uuid,utilization.gpu",
          "--format=csv,noheader,nounits").redirectErrorStream(true).start();
      if (!process.waitFor(5, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        return failed("nvidia-smi took longer than 5 s");
      }
      String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (process.exitValue() != 0) {
        return failed("nvidia-smi exited " + process.exitValue() + ": " + out.strip());
      }
      return parse(out);
    } catch (IOException e) {
      return failed(e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Map.of();
    }
  }

  /** Lines "index, uuid, percent"; a GPU that reports "[N/A]" or garbage counts as idle. */
  static Map<Integer, Double> parse(String csv) {
    Map<Integer, Double> utilisation = new HashMap<>();
    for (String line : csv.split("\n")) {
      String[] fields = line.split(",");
      if (fields.length < 3) {
        continue;
      }
      try {
        int index = Integer.parseInt(fields[0].strip());
        double percent = Double.parseDouble(fields[fields.length - 1].strip());
        utilisation.put(index, Math.max(0, Math.min(100, percent)) / 100);
      } catch (NumberFormatException notANumber) {
        // "[N/A]" on GPUs that do not report it, or a line that is not a GPU's.
      }
    }
    return utilisation;
  }

  private Map<Integer, Double> failed(String why) {
    if (!warned) {
      warned = true;
      LOG.warning("cannot sample GPU utilisation (" + why + "); busy counts as 0");
    }
    return Map.of();
  }

  @Override
  public String name() {
    return "nvidia-smi";
  }
}
