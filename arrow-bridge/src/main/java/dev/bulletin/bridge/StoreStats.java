package dev.bulletin.bridge;

/**
 * A snapshot of a store, for status, metrics and leak checks.
 *
 * @param objects visible objects, referenced or cached
 * @param referenced objects someone holds a reference on (the rest may be evicted at any time)
 * @param spilled objects whose bytes sit in the spill folder
 * @param memoryBytes bytes in the memory folder, including uploads in progress
 * @param spilledBytes bytes in the spill folder
 * @param capacityBytes the memory folder's limit
 * @param recycledFiles released objects' files handed to a writer to reuse, since the start
 */
public record StoreStats(int objects, int referenced, int spilled, long memoryBytes,
    long spilledBytes, long capacityBytes, long recycledFiles) {}
