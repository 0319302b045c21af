package dev.bulletin.protocol;

/** Limits both ends of a gRPC connection must agree on (the runtime's server, its clients). */
public final class WireLimits {
  /**
   * The largest gRPC message either side accepts. Bulk bytes never ride in one message (they
   * are chunked or go over the data port); this bounds control messages and inline objects.
   */
  public static final long MAX_MESSAGE_BYTES = 8L << 20;

  private WireLimits() {}
}
