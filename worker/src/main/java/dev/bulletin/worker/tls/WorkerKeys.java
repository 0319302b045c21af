package dev.bulletin.worker.tls;

import dev.bulletin.worker.tls.impl.BcWorkerCa;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.spec.ECGenParameterSpec;
import java.util.Set;
import org.bouncycastle.asn1.x500.X500NameBuilder;
import org.bouncycastle.asn1.x500.style.BCStyle;
import org.bouncycastle.openssl.jcajce.JcaPKCS8Generator;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;
import org.bouncycastle.pkcs.jcajce.JcaPKCS10CertificationRequestBuilder;

/**
 * A worker's own key pair and its certificate signing request. The key is made on the worker
 * and never leaves it: the request carries the public key, signed by the private one (the CA
 * checks that), and the worker's id as a hint the CA does not need (it names the worker from
 * the join token or the current certificate).
 */
public final class WorkerKeys {
  private final KeyPair keys;

  private WorkerKeys(KeyPair keys) {
    this.keys = keys;
  }

  /** A fresh EC P-256 key pair. */
  public static WorkerKeys generate() {
    try {
      KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
      generator.initialize(new ECGenParameterSpec("secp256r1"));
      return new WorkerKeys(generator.generateKeyPair());
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("this JVM cannot make an EC P-256 key: " + e, e);
    }
  }

  public KeyPair keyPair() {
    return keys;
  }

  /** A PEM PKCS#10 request for {@code workerId}'s certificate, signed with this key. */
  public String csr(String workerId) {
    try {
      return BcWorkerCa.pem(new JcaPKCS10CertificationRequestBuilder(
          new X500NameBuilder(BCStyle.INSTANCE).addRDN(BCStyle.CN, workerId).build(),
          keys.getPublic()).build(new JcaContentSignerBuilder("SHA256withECDSA")
              .build(keys.getPrivate())));
    } catch (OperatorCreationException | IOException e) {
      throw new IllegalStateException("cannot make a certificate request: " + e.getMessage(), e);
    }
  }

  /**
   * Writes the private key (PEM, PKCS#8) to {@code file}, owner-only (0600) from its creation
   * and never through a symbolic link at its name (a link planted there is refused, not
   * followed); an existing regular file is replaced.
   */
  public void writePrivateKey(Path file) throws IOException {
    Files.deleteIfExists(file); // removes a link itself, never its target
    try (OutputStream out = Channels.newOutputStream(Files.newByteChannel(file,
        Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE,
            LinkOption.NOFOLLOW_LINKS),
        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------"))))) {
      out.write(BcWorkerCa.pem(new JcaPKCS8Generator(keys.getPrivate(), null))
          .getBytes(StandardCharsets.UTF_8));
    }
  }
}
