package dev.bulletin.runtime.journal.impl;

import java.io.IOException;
import java.nio.ByteBuffer;

/** Passes everything to a real sink; tests override one method (a full disk, a late fsync). */
class DelegatingSink implements FrameSink {
  private final FrameSink real;

  DelegatingSink(FrameSink real) {
    this.real = real;
  }

  @Override
  public void write(ByteBuffer bytes) throws IOException {
    real.write(bytes);
  }

  @Override
  public void force() throws IOException {
    real.force();
  }

  @Override
  public long size() throws IOException {
    return real.size();
  }

  @Override
  public void truncate(long size) throws IOException {
    real.truncate(size);
  }

  @Override
  public void close() throws IOException {
    real.close();
  }
}
