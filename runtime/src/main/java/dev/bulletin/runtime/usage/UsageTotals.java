package dev.bulletin.runtime.usage;

/**
 * One user's (or group's) calls over a period. {@code user} is empty in a report by group;
 * {@code creditsEarned} is set on group rows only.
 */
public record UsageTotals(String user, String group, long calls, double gpuSecondsReserved,
    double gpuSecondsBusy, double creditsSpent, double creditsEarned, double queuedSeconds,
    double runningSeconds) {}
