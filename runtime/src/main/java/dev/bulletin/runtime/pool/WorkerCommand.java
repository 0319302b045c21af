package dev.bulletin.runtime.pool;

import dev.bulletin.protocol.Quantities;
import java.util.ArrayList;
import java.util.List;

/**
 * The command a provider runs to start a worker:
 * <pre>
 * PYTHON -m bulletin worker --head HOST:PORT --pool NAME --worker-id ID
 *        (--gpus N | --simulate-gpus N) --cpus N [--memory SIZE] [--expires-at EPOCH_SECONDS]
 * </pre>
 * with the cluster's worker token in {@code BULLETIN_WORKER_TOKEN}. Tests swap the program for a
 * stand-in; the arguments stay the contract's.
 *
 * @param program the program and its leading arguments; empty = {@code PYTHON -m bulletin worker}
 */
public record WorkerCommand(List<String> program) {

  public WorkerCommand {
    program = List.copyOf(program);
  }

  /** The real worker: {@code PYTHON -m bulletin worker}. */
  public static WorkerCommand bulletin() {
    return new WorkerCommand(List.of());
  }

  /**
   * Everything but {@code --expires-at}, which only the running allocation knows.
   *
   * @param python the interpreter (used only by the real worker command)
   */
  public List<String> argv(PoolConfig pool, String python, String head, String workerId,
      boolean simulateGpus) {
    List<String> argv = new ArrayList<>(program.isEmpty()
        ? List.of(python, "-m", "bulletin", "worker") : program);
    argv.addAll(List.of("--head", head, "--pool", pool.name(), "--worker-id", workerId));
    if (simulateGpus) {
      argv.addAll(List.of("--simulate-gpus", Integer.toString(pool.worker().gpus())));
    } else {
      argv.addAll(List.of("--gpus", Integer.toString(pool.worker().gpus())));
    }
    argv.addAll(List.of("--cpus", Integer.toString(pool.worker().cpus())));
    pool.worker().memory().ifPresent(m -> argv.addAll(List.of("--memory", Quantities.formatSize(m))));
    return argv;
  }
}
