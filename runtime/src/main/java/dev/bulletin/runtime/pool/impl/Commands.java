package dev.bulletin.runtime.pool.impl;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** Runs a short command (sbatch, squeue, kill) to completion and keeps what it printed. */
final class Commands {
  private Commands() {}

  /** Reads the pipes of running commands; daemon threads, so a stuck pipe never holds the JVM. */
  private static final java.util.concurrent.ExecutorService PIPES =
      java.util.concurrent.Executors.newCachedThreadPool(r -> {
        Thread thread = new Thread(r, "bulletin-command-pipe");
        thread.setDaemon(true);
        return thread;
      });

  /** Variables a worker or a Slurm job must never inherit from the runtime. */
  static final List<String> SECRET_VARIABLES = List.of("BULLETIN_OWNER_TOKEN", "BULLETIN_TOKEN");

  record Result(List<String> argv, int exitCode, String stdout, String stderr) {
    boolean ok() {
      return exitCode == 0;
    }

    /** What the tool said, for error messages: stderr, else stdout, trimmed. */
    String said() {
      String text = stderr.isBlank() ? stdout : stderr;
      return text.strip().replace('\n', ' ');
    }
  }

  static Result run(List<String> argv, Map<String, String> environment, Duration timeout) {
    ProcessBuilder builder = new ProcessBuilder(argv).redirectInput(ProcessBuilder.Redirect.from(
        new java.io.File("/dev/null")));
    SECRET_VARIABLES.forEach(builder.environment()::remove);
    builder.environment().putAll(environment);
    Process process;
    try {
      process = builder.start();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot run " + argv.get(0) + ": " + e.getMessage(), e);
    }
    CompletableFuture<String> err = CompletableFuture.supplyAsync(() -> read(process.getErrorStream()), PIPES);
    CompletableFuture<String> out = CompletableFuture.supplyAsync(() -> read(process.getInputStream()), PIPES);
    try {
      if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
        process.destroyForcibly();
        return new Result(argv, 124, "", argv.get(0) + " did not answer within "
            + timeout.toSeconds() + "s");
      }
      return new Result(argv, process.exitValue(), out.get(5, TimeUnit.SECONDS),
          err.get(5, TimeUnit.SECONDS));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      process.destroyForcibly();
      throw new IllegalStateException("interrupted while running " + argv.get(0), e);
    } catch (Exception e) {
      return new Result(argv, process.exitValue(), out.getNow(""), err.getNow(""));
    }
  }

  private static String read(InputStream in) {
    try (in) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "";
    }
  }

  /** Single-quotes one word for bash. */
  static String shellQuote(String word) {
    return "'" + word.replace("'", "'\\''") + "'";
  }
}
