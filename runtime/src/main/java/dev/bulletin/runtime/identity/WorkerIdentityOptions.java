package dev.bulletin.runtime.identity;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/**
 * Worker certificates (docs/security.md, "A certificate per worker"): the cluster CA's private
 * key, with which the runtime signs each worker's certificate, and their lifetime. Given, the
 * runtime asks each worker for its certificate and refuses the shared worker token.
 *
 * @param caKey the cluster CA's PEM private key (the CA's certificate is the TLS options' CA)
 * @param certificateLifetime how long a worker certificate is good; a running worker renews at
 *     two thirds of it
 */
public record WorkerIdentityOptions(Path caKey, Duration certificateLifetime) {
  /** The most a certificate may live: a stolen one must not be good for long. */
  static final Duration LONGEST = Duration.ofDays(30);

  public WorkerIdentityOptions {
    if (caKey == null || !Files.isReadable(caKey)) {
      throw new IllegalArgumentException("workerCaKey (--worker-ca-key): cannot read " + caKey);
    }
    if (certificateLifetime == null || certificateLifetime.toSeconds() < 3
        || certificateLifetime.compareTo(LONGEST) > 0) {
      throw new IllegalArgumentException("certificateLifetime (--worker-cert-lifetime) must be"
          + " 3 s to " + LONGEST.toDays() + " days, not " + certificateLifetime);
    }
  }
}
