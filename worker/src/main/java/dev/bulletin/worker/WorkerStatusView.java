package dev.bulletin.worker;

/** What a worker reports about its executors. */
public record WorkerStatusView(int executors, int idleExecutors, long executorLaunches) {}
