package dev.bulletin.bridge.dataport;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLEngineResult.HandshakeStatus;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.SSLParameters;

/**
 * TLS over a socket channel, as a byte channel: the data port's bytes when the cluster speaks
 * TLS (sendfile cannot encrypt, so this path copies through an {@link SSLEngine}). Works with the
 * socket in either mode: blocking on a data thread, where reads and writes complete, and
 * non-blocking in the data port's header gate, where {@link #read} returns 0 while the handshake
 * or the header waits for the network and {@link #hasPendingOutput} says when the gate must wait
 * for the socket to take more. The handshake runs inside the first reads and writes, so the
 * gate never blocks on a slow peer; the handshake's CPU work runs on the calling thread.
 * Not thread-safe: one reader-writer at a time, as the data port's protocol is.
 */
public final class TlsChannel implements ByteChannel {
  /**
   * Ciphertext moved per system call once the socket blocks (a data thread's transfer): many
   * 16 KiB records each time. Until then (the header gate) the buffers hold one record: the
   * gate keeps up to thousands of pending connections, and a flood of them must not take
   * gigabytes.
   */
  private static final int NET_BUFFER_BYTES = 256 << 10;
  private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);
  private static final String PREFERRED_SUITE = "TLS_AES_128_GCM_SHA256";
  /** {@link #unwrap}: netIn holds no whole record. */
  private static final int NEED_INPUT = -2;
  /** {@link #unwrap}: the peer closed the TLS session. */
  private static final int CLOSED = -1;

  private final SocketChannel socket;
  private final SSLEngine engine;
  /**
   * Ciphertext received, not yet unwrapped; between position and limit (read mode). Compacted
   * only before the socket fills it: compacting after every record would move the rest of the
   * buffer once per 16 KiB.
   */
  private ByteBuffer netIn;
  /** Ciphertext wrapped, not yet sent; pending bytes between position and limit (read mode). */
  private ByteBuffer netOut;
  /** Plaintext unwrapped, not yet read; between position and limit (read mode). */
  private ByteBuffer appIn;
  /** Whether netIn and netOut have their transfer size (see {@link #NET_BUFFER_BYTES}). */
  private boolean bulk;
  /** Whether the handshake was begun (see {@link #begin}). */
  private boolean begun;

  private TlsChannel(SocketChannel socket, SSLEngine engine) {
    this.socket = socket;
    this.engine = engine;
    int packet = engine.getSession().getPacketBufferSize();
    this.netIn = ByteBuffer.allocate(packet).flip();
    this.netOut = ByteBuffer.allocate(packet).flip();
    this.appIn = ByteBuffer.allocate(engine.getSession().getApplicationBufferSize()).flip();
  }

  /** Once the socket blocks, large direct buffers (keeping what the small ones hold). */
  private void sizeForTransfer() {
    if (bulk || !socket.isBlocking()) {
      return;
    }
    bulk = true;
    netIn = ByteBuffer.allocateDirect(NET_BUFFER_BYTES).put(netIn).flip();
    netOut = ByteBuffer.allocateDirect(NET_BUFFER_BYTES).put(netOut).flip();
  }

  /** The server side of an accepted connection. */
  public static TlsChannel server(SocketChannel socket, TlsEngines engines) {
    SSLEngine engine = engines.forServer();
    engine.setUseClientMode(false);
    // AES-128-GCM first (clients offer AES-256 first): bulk transfers spend their CPU in the
    // cipher, and AES-128 takes 10 rounds where AES-256 takes 14. It is TLS 1.3's
    // mandatory suite; every client has it.
    SSLParameters parameters = engine.getSSLParameters();
    List<String> suites = new ArrayList<>(List.of(parameters.getCipherSuites()));
    if (suites.remove(PREFERRED_SUITE)) {
      suites.add(0, PREFERRED_SUITE);
    }
    parameters.setCipherSuites(suites.toArray(String[]::new));
    parameters.setUseCipherSuitesOrder(true);
    engine.setSSLParameters(parameters);
    return new TlsChannel(socket, engine);
  }

  /**
   * The client side, checking that the server's certificate names {@code host} (a name or an
   * address, as dialled) and is signed by a CA the engines trust.
   */
  public static TlsChannel client(SocketChannel socket, TlsEngines engines, String host,
      int port) {
    SSLEngine engine = engines.forClient(host, port);
    engine.setUseClientMode(true);
    SSLParameters parameters = engine.getSSLParameters();
    parameters.setEndpointIdentificationAlgorithm("HTTPS");
    engine.setSSLParameters(parameters);
    return new TlsChannel(socket, engine);
  }

  /** The socket underneath (for its options, its blocking mode and its selector key). */
  public SocketChannel socket() {
    return socket;
  }

  /** Whether wrapped bytes wait for the socket to take them (non-blocking mode only). */
  public boolean hasPendingOutput() {
    return netOut.hasRemaining();
  }

  /**
   * Reads plaintext, running the handshake first if it has not run. Returns the bytes read, -1
   * at the end of the stream, or 0 in non-blocking mode when the network has nothing yet.
   */
  @Override
  public int read(ByteBuffer dst) throws IOException {
    if (!dst.hasRemaining()) {
      return 0;
    }
    begin();
    while (true) {
      if (appIn.hasRemaining()) {
        return drainAppIn(dst);
      }
      if (!flush()) {
        return 0;
      }
      HandshakeStatus status = engine.getHandshakeStatus();
      if (status == HandshakeStatus.NEED_TASK) {
        runTasks();
      } else if (status == HandshakeStatus.NEED_WRAP) {
        wrap(EMPTY);
      } else {
        int got = unwrap(dst);
        if (got > 0 || got == CLOSED) {
          return got;
        }
        // Only an incomplete record calls for the socket: a blocking read with a whole
        // record still buffered would wait for bytes the peer never sends.
        if (got == NEED_INPUT) {
          int filled = fill();
          if (filled <= 0) {
            return filled;
          }
        }
      }
    }
  }

  /**
   * Writes plaintext, running the handshake first if it has not run. In blocking mode all of
   * {@code src} is sent; in non-blocking mode what the socket did not take stays wrapped here
   * ({@link #hasPendingOutput}) and goes out with the next call or {@link #flush}.
   */
  @Override
  public int write(ByteBuffer src) throws IOException {
    begin();
    int consumed = 0;
    while (true) {
      if (!flush()) {
        return consumed;
      }
      HandshakeStatus status = engine.getHandshakeStatus();
      if (status == HandshakeStatus.NEED_TASK) {
        runTasks();
      } else if (status == HandshakeStatus.NEED_WRAP) {
        wrap(EMPTY);
      } else if (status == HandshakeStatus.NEED_UNWRAP) {
        // The handshake waits for the peer: read it (early plaintext, if any, waits in appIn).
        int got = unwrap(null);
        if (got == CLOSED) {
          throw new SSLException("the peer closed the TLS session during the handshake");
        }
        if (got == NEED_INPUT) {
          int filled = fill();
          if (filled < 0) {
            throw new EOFException("the peer closed the connection during the TLS handshake");
          }
          if (filled == 0) {
            return consumed;
          }
        }
      } else if (!src.hasRemaining()) {
        return consumed;
      } else {
        consumed += wrap(src);
      }
    }
  }

  /**
   * Begins the handshake, so that the engine says which side moves first whichever side reads
   * or writes first: a fresh engine says "not handshaking" until it wraps or unwraps, and what
   * a first call does then is the library's choice.
   */
  private void begin() throws SSLException {
    if (!begun) {
      begun = true;
      engine.beginHandshake();
    }
  }

  /** Sends what was wrapped; true once nothing waits (always, in blocking mode). */
  public boolean flush() throws IOException {
    while (netOut.hasRemaining()) {
      if (socket.write(netOut) == 0) {
        return false;
      }
    }
    return true;
  }

  @Override
  public boolean isOpen() {
    return socket.isOpen();
  }

  /**
   * Closes the socket and the engine; no close_notify (every transfer ends with its own status
   * or CRC). Closing both of the engine's directions is what frees a native engine's memory at
   * once rather than at its finalizer.
   */
  @Override
  public void close() throws IOException {
    try {
      socket.close();
    } finally {
      engine.closeOutbound();
      try {
        engine.closeInbound();
      } catch (SSLException noCloseNotify) {
        // Expected: the peer sent none, as above.
      }
    }
  }

  private int drainAppIn(ByteBuffer dst) {
    int n = Math.min(appIn.remaining(), dst.remaining());
    ByteBuffer slice = appIn.slice(appIn.position(), n);
    dst.put(slice);
    appIn.position(appIn.position() + n);
    return n;
  }

  /**
   * Unwraps one record of what netIn holds: plaintext goes straight into {@code dst} when it
   * has room for a whole record (the large reads of a transfer: no extra copy), else into
   * appIn. Returns the bytes put into dst; 0 when none but the call moved on (a handshake
   * record, or plaintext that waits in appIn); {@link #NEED_INPUT} when netIn holds no whole
   * record; {@link #CLOSED} once the peer closed the TLS session.
   */
  private int unwrap(ByteBuffer dst) throws IOException {
    int appSize = engine.getSession().getApplicationBufferSize();
    boolean direct = dst != null && !appIn.hasRemaining() && dst.remaining() >= appSize;
    ByteBuffer target = direct ? dst : appIn.compact();
    int before = target.position();
    SSLEngineResult result;
    try {
      result = engine.unwrap(netIn, target);
    } catch (SSLException e) {
      throw explained(e);
    } finally {
      if (!direct) {
        appIn.flip();
      }
    }
    switch (result.getStatus()) {
      case OK:
        if (result.getHandshakeStatus() == HandshakeStatus.NEED_TASK) {
          runTasks();
        }
        return direct ? target.position() - before : 0;
      case BUFFER_UNDERFLOW:
        if (result.getHandshakeStatus() == HandshakeStatus.FINISHED) {
          // BoringSSL ends a server's handshake on a call that also found no next record:
          // the caller must look at the handshake again, not wait for the peer.
          return 0;
        }
        if (netIn.remaining() == netIn.capacity()) { // a record larger than the buffer
          netIn = grow(netIn.compact(), engine.getSession().getPacketBufferSize()).flip();
        }
        return NEED_INPUT;
      case BUFFER_OVERFLOW: // the session's records outgrew appIn (dst is never used then)
        appIn = grow(appIn.compact(), Math.max(appSize, appIn.capacity())).flip();
        return 0;
      case CLOSED:
      default:
        return CLOSED;
    }
  }

  /** Wraps src (or a handshake message) into netOut and sends it; returns the bytes taken. */
  private int wrap(ByteBuffer src) throws IOException {
    sizeForTransfer();
    int packet = engine.getSession().getPacketBufferSize();
    netOut.compact();
    int consumed = 0;
    try {
      // Several records per system call when src is large.
      do {
        if (netOut.remaining() < packet) {
          if (netOut.position() > 0) {
            break;
          }
          netOut = grow(netOut, packet);
        }
        SSLEngineResult result;
        try {
          result = engine.wrap(src, netOut);
        } catch (SSLException e) {
          throw explained(e);
        }
        consumed += result.bytesConsumed();
        if (result.getStatus() == SSLEngineResult.Status.CLOSED) {
          throw new SSLException("the TLS session is closed");
        }
        if (result.getHandshakeStatus() == HandshakeStatus.NEED_TASK) {
          runTasks();
        }
        if (result.bytesProduced() == 0) {
          break;
        }
      } while (src.hasRemaining() && engine.getHandshakeStatus()
          == HandshakeStatus.NOT_HANDSHAKING);
    } finally {
      netOut.flip();
    }
    flush();
    return consumed;
  }

  /**
   * Reads ciphertext into netIn: the bytes read, 0 when none now (non-blocking), -1 at the end
   * of the stream after the handshake (during it, the peer's leaving is an error).
   */
  private int fill() throws IOException {
    sizeForTransfer();
    netIn.compact();
    int read;
    try {
      read = socket.read(netIn);
    } finally {
      netIn.flip();
    }
    if (read < 0 && engine.getHandshakeStatus() != HandshakeStatus.NOT_HANDSHAKING) {
      throw new SSLHandshakeException("the peer closed the connection during the TLS handshake"
          + " (it may not speak TLS, or it does not trust this side's certificate)");
    }
    return read;
  }

  /**
   * The engine's exception with its cause's message in its own: a native engine says "General
   * OpenSslEngine problem" where the reason is the trust manager's (which certificate was
   * refused, and why), and that reason is what the user must read.
   */
  private static SSLException explained(SSLException e) {
    Throwable cause = e.getCause();
    String reason = cause == null ? null : cause.getMessage();
    if (reason == null || String.valueOf(e.getMessage()).contains(reason)) {
      return e;
    }
    SSLException told = e instanceof SSLHandshakeException
        ? new SSLHandshakeException(e.getMessage() + ": " + reason)
        : new SSLException(e.getMessage() + ": " + reason);
    told.initCause(e);
    return told;
  }

  private void runTasks() {
    for (Runnable task = engine.getDelegatedTask(); task != null;
        task = engine.getDelegatedTask()) {
      task.run();
    }
  }

  /** A buffer with at least {@code room} free bytes more, holding what {@code full} held. */
  private static ByteBuffer grow(ByteBuffer full, int room) {
    ByteBuffer bigger = ByteBuffer.allocateDirect(full.position() + room);
    full.flip();
    bigger.put(full);
    return bigger;
  }
}
