package dev.bulletin.bridge.dataport;

import javax.net.ssl.SSLEngine;

/**
 * Where a data port's TLS connections get their {@link SSLEngine}s, one per connection. The
 * data path needs nothing of a TLS library but its engines, so the library is chosen where the
 * keys and trust are (the worker's {@code TlsSetup}: BoringSSL where its native code loads, the
 * JDK's engine elsewhere), not here.
 */
public interface TlsEngines {
  /** An engine for the accepting side of a connection, not yet in server mode. */
  SSLEngine forServer();

  /** An engine for a connection dialled to {@code host} (name or address) and port. */
  SSLEngine forClient(String host, int port);
}
