package dev.bulletin.worker.impl;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The environment of an executor, built from an allowlist: user code runs in it, and the agent's
 * own environment holds the cluster's secrets (BULLETIN_OWNER_TOKEN, BULLETIN_WORKER_TOKEN, ...).
 * Only what Python, CUDA and numeric libraries need passes from the agent's environment; the
 * configured extra variables and the executor's own settings are added. docs/internals.md lists
 * the same names: keep the two in step.
 */
final class ExecutorEnvironment {

  /**
   * Variables passed by name. TMPDIR, TEMP and TMP are allowed names whose values are never the
   * agent's: each executor's own scratch folder replaces them ({@link ExecutorScratch}), so one
   * executor's temporary files are not where another's are.
   */
  static final Set<String> NAMES = Set.of(
      "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP",
      "TMP", "TERM",
      "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH",
      "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
      "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS");

  /** Families passed by prefix: locale, and the CUDA/NVIDIA/NCCL device and library settings. */
  static final List<String> PREFIXES = List.of("LC_", "CUDA_", "NVIDIA_", "NCCL_", "CUDNN_");

  private ExecutorEnvironment() {}

  /** Whether a variable of the agent's environment passes to executors. */
  static boolean passes(String name) {
    if (name.startsWith("BULLETIN_")) {
      return false;
    }
    return NAMES.contains(name) || PREFIXES.stream().anyMatch(name::startsWith);
  }

  /**
   * @param inherited the agent's environment
   * @param extra configured variables, added as they are (never BULLETIN_*: WorkerOptions)
   * @param own the executor's settings, set last
   */
  static Map<String, String> build(Map<String, String> inherited, Map<String, String> extra,
      Map<String, String> own) {
    Map<String, String> env = new TreeMap<>();
    inherited.forEach((name, value) -> {
      if (passes(name)) {
        env.put(name, value);
      }
    });
    env.putAll(extra);
    env.putAll(own);
    return env;
  }
}
