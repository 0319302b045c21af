package dev.bulletin.worker.impl;

import java.util.Map;

/** Turns a process exit status into words a researcher can act on. */
final class ExitCauses {
  private ExitCauses() {}

  private static final Map<Integer, String> SIGNALS = Map.of(
      4, "SIGILL (illegal instruction)",
      6, "SIGABRT (aborted, e.g. a failed assertion in native code)",
      7, "SIGBUS (bus error)",
      8, "SIGFPE (arithmetic error)",
      9, "SIGKILL (killed, often by the out-of-memory killer)",
      11, "SIGSEGV (segmentation fault in native code)",
      15, "SIGTERM (terminated)");

  /** Java reports a process killed by signal N as exit status 128 + N. */
  static String describe(int exitStatus) {
    if (exitStatus > 128 && exitStatus < 160) {
      int signal = exitStatus - 128;
      return "killed by " + SIGNALS.getOrDefault(signal, "signal " + signal);
    }
    return "exited with status " + exitStatus + (exitStatus == 0 ? "" : " (e.g. os._exit or sys.exit in native code)");
  }
}
