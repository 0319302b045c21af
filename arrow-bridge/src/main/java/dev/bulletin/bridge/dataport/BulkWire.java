package dev.bulletin.bridge.dataport;

/**
 * The data port's wire format, shared by its server (the runtime) and its clients (worker
 * nodes; the Python client has its twin in {@code bulletin._data._bulk}). Big-endian:
 *
 * <pre>
 * client: "BLKD" u32 version=1, 32-byte ticket            (the runtime's port)
 *         "BLKD" u32 version=2, u32 length, direct request (a worker's port: DirectTicket)
 * server: u8 status (0 = go on; else u32 length + UTF-8 message, then it closes)
 * PUT  client: the object's bytes, u32 CRC32C of them; server: u8 status, u32 length, message
 * GET  server: u64 size, the file's bytes (sendfile), u32 CRC32C of them
 * </pre>
 *
 * <p>A worker's port speaking TLS sends {@link #NO_CRC} as the trailer of a GET: TLS records
 * are authenticated (AES-GCM), which covers what the CRC would, and its reader knows it dialled
 * TLS, so it does not check it.
 */
public final class BulkWire {
  public static final int MAGIC = 0x424C4B44; // "BLKD"
  public static final int VERSION = 1;
  /** A worker's own data port: a GET with a ticket the head signed ({@link DirectTicket}). */
  public static final int VERSION_DIRECT = 2;
  public static final byte OK = 0;
  /** The ticket is unknown, used, expired, or the header is not ours: do not retry it. */
  public static final byte REFUSED = 1;
  /** The bytes failed their CRC32C check: nothing was stored, send them again. */
  public static final byte CORRUPT = 2;
  /** The store could not take or give the object; the message says why. */
  public static final byte FAILED = 3;
  /** The trailer of a GET from a worker's TLS port: no CRC computed (see above). */
  public static final int NO_CRC = 0;

  private BulkWire() {}
}
