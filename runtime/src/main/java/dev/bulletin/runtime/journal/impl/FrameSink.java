package dev.bulletin.runtime.journal.impl;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Where a log's frames are written: the channel boundary, so that a test can make it fail as a
 * full disk does (ENOSPC) where it cannot mount a small file system.
 */
public interface FrameSink extends AutoCloseable {

  /** Opens (creating) a log file for appending. */
  @FunctionalInterface
  interface Opener {
    FrameSink open(Path file) throws IOException;
  }

  /** Real files. */
  Opener FILES = file -> {
    FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE,
        StandardOpenOption.WRITE, StandardOpenOption.READ);
    channel.position(channel.size());
    return new FrameSink() {
      @Override
      public void write(ByteBuffer bytes) throws IOException {
        while (bytes.hasRemaining()) {
          channel.write(bytes);
        }
      }

      @Override
      public void force() throws IOException {
        channel.force(false);
      }

      @Override
      public long size() throws IOException {
        return channel.size();
      }

      @Override
      public void truncate(long size) throws IOException {
        channel.truncate(size);
        channel.position(size);
      }

      @Override
      public void close() throws IOException {
        channel.close();
      }
    };
  };

  void write(ByteBuffer bytes) throws IOException;

  /** Makes what was written durable (fdatasync). */
  void force() throws IOException;

  long size() throws IOException;

  /** Cuts a partly written batch off, so the next batch starts on a frame boundary. */
  void truncate(long size) throws IOException;

  @Override
  void close() throws IOException;
}
