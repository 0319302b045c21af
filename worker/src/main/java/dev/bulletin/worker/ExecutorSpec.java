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
 */
public record ExecutorSpec(long memoryBytes, String pythonExecutable, String fingerprint,
    String pythonVersion, List<String> pip) {

  public static final ExecutorSpec NONE = new ExecutorSpec(0, "", "", "", List.of());

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

  /** The environment part, as the wire carries it. */
  public CallEnvironment toProto() {
    return CallEnvironment.newBuilder().setPythonExecutable(pythonExecutable)
        .setFingerprint(fingerprint).setPythonVersion(pythonVersion).addAllPip(pip).build();
  }
}
