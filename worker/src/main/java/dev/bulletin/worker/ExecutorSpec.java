package dev.bulletin.worker;

import dev.bulletin.protocol.CallEnvironment;
import java.util.List;
import java.util.Set;

/**
 * What a call needs of the executor that runs it, beyond its GPUs and its user: a memory limit
 * (its {@code memory=} request) and a Python environment (docs/environments.md). Executors are
 * matched to calls by it; validated once, here, so the runtime refuses a bad one at submit.
 *
 * @param memoryBytes the call's memory request, 0 for none
 * @param pythonExecutable the caller's interpreter, "" for the worker's own
 * @param fingerprint the caller's environment fingerprint, "" when unknown
 * @param pythonVersion the caller's "major.minor", "" when unknown
 * @param pip requirements and allowed pip options for a cached environment; empty for none
 * @param gpuFraction a fractional call's share of its one GPU (0 < f < 1), 0 for whole GPUs:
 *     its executor is started with it (BULLETIN_GPU_FRACTION, a GPU memory cap)
 */
public record ExecutorSpec(long memoryBytes, String pythonExecutable, String fingerprint,
    String pythonVersion, List<String> pip, double gpuFraction) {

  public static final ExecutorSpec NONE = new ExecutorSpec(0, "", "", "", List.of());

  public ExecutorSpec(long memoryBytes, String pythonExecutable, String fingerprint,
      String pythonVersion, List<String> pip) {
    this(memoryBytes, pythonExecutable, fingerprint, pythonVersion, pip, 0);
  }

  /**
   * pip options a call may give: where packages come from. Others (--target, --prefix, --root,
   * --user, --src, --config-settings, ...) would write outside the environment being built.
   */
  static final Set<String> PIP_OPTIONS = Set.of("--find-links", "-f", "--no-index",
      "--index-url", "-i", "--extra-index-url", "--pre", "--no-deps", "--only-binary",
      "--prefer-binary");

  public ExecutorSpec {
    if (memoryBytes < 0) {
      throw new IllegalArgumentException("memory must be >= 0 bytes, got " + memoryBytes);
    }
    pythonExecutable = pythonExecutable == null ? "" : pythonExecutable;
    fingerprint = fingerprint == null ? "" : fingerprint;
    pythonVersion = pythonVersion == null ? "" : pythonVersion;
    if (!pythonVersion.isEmpty() && !pythonVersion.matches("[0-9]{1,2}\\.[0-9]{1,3}")) {
      throw new IllegalArgumentException("environment.python_version must read like 3.11, got '"
          + pythonVersion + "'");
    }
    if (!pythonExecutable.isEmpty() && (!pythonExecutable.startsWith("/")
        || pythonExecutable.contains("\0") || pythonExecutable.length() > 4096)) {
      throw new IllegalArgumentException("environment.python_executable must be an absolute"
          + " path, got '" + pythonExecutable + "'");
    }
    if (!(gpuFraction >= 0 && gpuFraction < 1)) {
      throw new IllegalArgumentException("gpu_fraction must be within 0 (whole GPUs) and 1, got "
          + gpuFraction);
    }
    pip = List.copyOf(pip == null ? List.of() : pip);
    for (String entry : pip) {
      checkPipEntry(entry);
    }
  }

  private static void checkPipEntry(String entry) {
    if (entry.isBlank() || entry.length() > 4096 || entry.contains("\0")
        || entry.contains("\n")) {
      throw new IllegalArgumentException("pip=[...] has an empty or malformed entry: '" + entry
          + "'");
    }
    if (entry.startsWith("-")) {
      String option = entry.split("[= ]", 2)[0];
      if (!PIP_OPTIONS.contains(option)) {
        throw new IllegalArgumentException("pip=[...] may not pass the option '" + option
            + "': a call's pip options may only say where packages come from ("
            + String.join(", ", new java.util.TreeSet<>(PIP_OPTIONS)) + ")");
      }
    }
  }

  /** Whether the call names packages to install. */
  public boolean needsPackages() {
    return !pip.isEmpty();
  }

  /** The spec of a call: its memory request and the environment it carries, if any. */
  public static ExecutorSpec of(long memoryBytes, CallEnvironment environment) {
    if (memoryBytes == 0 && environment.equals(CallEnvironment.getDefaultInstance())) {
      return NONE;
    }
    return new ExecutorSpec(memoryBytes, environment.getPythonExecutable(),
        environment.getFingerprint(), environment.getPythonVersion(),
        environment.getPipList());
  }

  /** This spec for a share of one GPU ({@code fraction} 0: whole GPUs). */
  public ExecutorSpec withGpuFraction(double fraction) {
    return fraction == gpuFraction ? this
        : new ExecutorSpec(memoryBytes, pythonExecutable, fingerprint, pythonVersion, pip, fraction);
  }

  /** The environment part, as the wire carries it. */
  public CallEnvironment toProto() {
    return CallEnvironment.newBuilder().setPythonExecutable(pythonExecutable)
        .setFingerprint(fingerprint).setPythonVersion(pythonVersion).addAllPip(pip).build();
  }
}
