package dev.bulletin.protocol;

import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.Locale;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.logging.Formatter;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogManager;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * The logging of every bulletin JVM (runtime and worker), set up once at start. bulletin logs
 * with java.util.logging, and the libraries' SLF4J logs reach it through the slf4j-jdk14
 * provider in the runtime jar: one system, one format, one place to set levels.
 *
 * <p>One line per record on stderr (`bulletin up` sends it to this start's runtime.log), written
 * by a thread of its own: the event loops that log a call's state changes only queue a record
 * (a call's life is a few lines at INFO; writing and flushing them on the loop would cost a
 * pipelined map its throughput). Netty's per-connection and per-stream chatter is kept below
 * INFO. {@code BULLETIN_LOG_LEVEL} (e.g. FINE) sets bulletin's own level; a
 * {@code -Djava.util.logging.config.file} replaces all of this.
 */
public final class LogSetup {
  /** Calls' state changes and preemptions: one line each, at INFO. */
  public static final String CALLS = "bulletin.calls";
  private static final int QUEUED_RECORDS = 65_536;
  private static final long LINGER_MILLIS = 10;
  private static volatile boolean done;

  private LogSetup() {}

  public static synchronized void configure() {
    if (done || System.getProperty("java.util.logging.config.file") != null) {
      return;
    }
    done = true;
    LogManager.getLogManager().reset();
    Logger root = Logger.getLogger("");
    root.setLevel(Level.INFO);
    root.addHandler(new AsyncHandler(System.err));
    // Netty reports every reset stream and closed connection; they are normal here (a client
    // that went away), so they stay below INFO unless they are errors.
    Logger.getLogger("io.netty").setLevel(Level.WARNING);
    String level = System.getenv("BULLETIN_LOG_LEVEL");
    if (level != null && !level.isBlank()) {
      try {
        Level parsed = Level.parse(level.trim().toUpperCase(java.util.Locale.ROOT));
        Logger.getLogger("dev.bulletin").setLevel(parsed);
        Logger.getLogger(CALLS).setLevel(parsed);
        if (parsed.intValue() < root.getLevel().intValue()) {
          root.setLevel(parsed);
        }
      } catch (IllegalArgumentException e) {
        root.warning("BULLETIN_LOG_LEVEL=" + level + " is no log level (use SEVERE, WARNING,"
            + " INFO, FINE or FINER); logging at INFO");
      }
    }
  }

  /**
   * The handler {@link #configure} gives the root logger, writing to {@code stream}: for a
   * harness that runs a runtime inside a JVM whose logging is set up otherwise (a test JVM's
   * file handler formats and writes each record on the logging thread) and must log as a
   * runtime does (make bench-scale).
   */
  public static Handler runtimeHandler(PrintStream stream) {
    return new AsyncHandler(stream);
  }

  /** Writes records on a thread of its own; drops records (and says how many) when flooded. */
  private static final class AsyncHandler extends Handler {
    private final BlockingQueue<LogRecord> queue = new ArrayBlockingQueue<>(QUEUED_RECORDS);
    private final Writer out;
    private final Formatter format = new LineFormatter();
    private final java.util.concurrent.atomic.AtomicLong dropped =
        new java.util.concurrent.atomic.AtomicLong();

    AsyncHandler(PrintStream stream) {
      this.out = new BufferedWriter(new OutputStreamWriter(stream, StandardCharsets.UTF_8));
      Thread writer = new Thread(this::drain, "bulletin-log");
      writer.setDaemon(true);
      writer.start();
      // Records queued when the JVM exits still reach the file.
      Runtime.getRuntime().addShutdownHook(new Thread(this::flushQueued, "bulletin-log-exit"));
    }

    @Override
    public void publish(LogRecord record) {
      if (isLoggable(record) && !queue.offer(record)) {
        dropped.incrementAndGet();
      }
    }

    private void drain() {
      while (true) {
        try {
          write(queue.take());
          // The records that follow within a few ms go out in the same write: a pipelined map
          // logs thousands a second, and a write and flush each cost more than formatting them.
          Thread.sleep(LINGER_MILLIS);
          flushQueued();
        } catch (InterruptedException e) {
          return;
        }
      }
    }

    private synchronized void flushQueued() {
      LogRecord record;
      while ((record = queue.poll()) != null) {
        write(record);
      }
      try {
        long count = dropped.getAndSet(0);
        if (count > 0) {
          out.write("(" + count + " log records dropped: the log could not keep up)"
              + System.lineSeparator());
        }
        out.flush();
      } catch (java.io.IOException ignored) {
        // stderr is gone: nothing to report to
      }
    }

    private synchronized void write(LogRecord record) {
      try {
        out.write(format.format(record));
      } catch (RuntimeException | java.io.IOException ignored) {
        // a record that cannot be formatted or written is lost, not the logging thread
      }
    }

    @Override
    public void flush() {
      flushQueued();
    }

    @Override
    public void close() {
      flushQueued();
    }
  }

  /**
   * {@code 2026-11-23 21:05:07.123 INFO bulletin.calls: message}, and a thrown exception's stack
   * below. Not SimpleFormatter: it runs java.util.Formatter on every record and walks the stack
   * for a source class the format does not print, about 30 µs a record, and a pipelined map
   * logs three records a call.
   */
  static final class LineFormatter extends Formatter {
    private static final DateTimeFormatter TIME = DateTimeFormatter
        .ofPattern("yyyy-MM-dd HH:mm:ss.SSS", Locale.ROOT).withZone(ZoneId.systemDefault());

    @Override
    public String format(LogRecord record) {
      StringBuilder line = new StringBuilder(160);
      TIME.formatTo(record.getInstant(), line);
      line.append(' ').append(record.getLevel().getLocalizedName()).append(' ')
          .append(record.getLoggerName()).append(": ").append(formatMessage(record));
      if (record.getThrown() != null) {
        StringWriter trace = new StringWriter();
        try (PrintWriter out = new PrintWriter(trace)) {
          out.println();
          record.getThrown().printStackTrace(out);
        }
        line.append(trace.toString().stripTrailing());
      }
      return line.append(System.lineSeparator()).toString();
    }
  }
}
