package dev.bulletin.runtime.scheduler;

/**
 * Whether a call could ever run on a cluster, busy or not: "never" is apart from "not now". An
 * infeasible call fails at once with {@code reason}, which says what the cluster has.
 */
public sealed interface Feasibility {

  Feasibility FEASIBLE = new Feasible();

  /** Some worker could run it when idle. */
  record Feasible() implements Feasibility {}

  /** No worker could ever run it as asked; {@code reason} says what the cluster has. */
  record Infeasible(String reason) implements Feasibility {}

  default boolean feasible() {
    return this instanceof Feasible;
  }
}
