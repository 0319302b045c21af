package dev.bulletin.runtime;

import dev.bulletin.runtime.config.ClusterTokens;
import dev.bulletin.runtime.config.ConfigHost;
import dev.bulletin.runtime.config.RuntimeConfig;
import dev.bulletin.runtime.pool.WorkerProviders;
import dev.bulletin.worker.node.VersionProvider;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/**
 * {@code bulletin-runtime check-config FILE}: reads a config file exactly as the runtime would at
 * start-up and prints "ok" or every mistake in it, so a sysadmin can check an edit before a
 * restart.
 */
@Command(name = "bulletin-runtime " + CheckConfig.NAME, mixinStandardHelpOptions = true,
    versionProvider = VersionProvider.class,
    description = "Check a runtime config file: prints 'ok', or every mistake with its field, and"
        + " exits with 1. Users' tokens are compared with the owner's and the workers' when"
        + " BULLETIN_OWNER_TOKEN and BULLETIN_WORKER_TOKEN are set (bulletin up sets them);"
        + " Slurm pools are checked against Slurm (sbatch, scontrol), as at start-up; users'"
        + " run_as accounts against this machine's accounts (getent), and, with --python,"
        + " whether each can run that interpreter.")
final class CheckConfig implements Callable<Integer> {
  static final String NAME = "check-config";

  @Parameters(paramLabel = "FILE", description = "The YAML config file.")
  Path file;

  @Option(names = "--python", paramLabel = "PATH",
      description = "The executors' interpreter, as bulletin up passes it (the sys.executable of"
          + " the Python it runs under): each users[].run_as account must be able to search"
          + " every folder on the way to it and run it, as a runtime running as root checks at"
          + " start-up. Not checked without it.")
  Path python;

  @Spec
  CommandSpec spec;

  @Override
  public Integer call() {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    RuntimeConfig config;
    try {
      config = RuntimeConfig.load(file, ClusterTokens.fromEnvironment(),
          ConfigHost.thisMachine().withInterpreter(python));
    } catch (IllegalArgumentException e) { // a ConfigException lists every mistake
      err.println(e.getMessage());
      return 1;
    }
    try {
      WorkerProviders.check(config.pools());
    } catch (IllegalArgumentException e) {
      err.println("config file " + file + ": " + e.getMessage());
      return 1;
    }
    out.println("ok");
    return 0;
  }
}
