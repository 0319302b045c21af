package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.ReadableByteChannel;
import java.nio.file.Path;
import java.util.concurrent.Executor;
import java.util.function.Consumer;

/** A chunked write into a temporary file, in room the store reserved before the first chunk. */
final class FileUpload implements ObjectStore.Upload {
  private final FileObjectStore store;
  private final ObjectKey key;
  private final long size;
  private final Path temp;
  /** Opened on the first byte (see FileObjectStore#openUploadFile). */
  private FileChannel out;
  /** Whether {@link #out} is a released object's file: its pages are allocated already. */
  private boolean reusedFile;
  private long written;
  private boolean finished;

  FileUpload(FileObjectStore store, ObjectKey key, long size, Path temp) {
    this.store = store;
    this.key = key;
    this.size = size;
    this.temp = temp;
  }

  private FileChannel out() {
    if (out == null) {
      try {
        FileObjectStore.UploadFile file = store.openUploadFile(key.namespace(), size, temp);
        out = file.channel();
        reusedFile = file.reused();
      } catch (IOException e) {
        throw new ObjectStoreException("cannot start upload of " + key + ": " + e, e);
      }
    }
    return out;
  }

  @Override
  public void write(ByteBuffer chunk) {
    if (finished) {
      throw new ObjectStoreException("upload of " + key + " is already finished");
    }
    if (written + chunk.remaining() > size) {
      throw new ObjectStoreException("upload of " + key + " sent more than the announced "
          + size + " bytes");
    }
    try {
      ByteBuffer source = chunk.duplicate();
      FileChannel file = out();
      while (source.hasRemaining()) {
        written += file.write(source);
      }
    } catch (IOException e) {
      throw new ObjectStoreException("cannot write upload of " + key + ": " + e, e);
    }
  }

  @Override
  public boolean receiveInPlace(ReadableByteChannel source, Consumer<ByteBuffer> received,
      Executor helper) throws IOException {
    if (finished) {
      throw new ObjectStoreException("upload of " + key + " is already finished");
    }
    out();
    if (!reusedFile) {
      return false;
    }
    new MappedReceive(out, written, size).run(source, received, helper, n -> written += n);
    return true;
  }

  @Override
  public long written() {
    return written;
  }

  @Override
  public ObjectKey commit() {
    if (finished) {
      throw new ObjectStoreException("upload of " + key + " is already finished");
    }
    out(); // an empty object has its file too
    closeChannel();
    if (written != size) {
      throw new ObjectStoreException("upload of " + key + " ended after " + written + " of "
          + size + " bytes");
    }
    finished = true;
    return store.commitUpload(key, size, temp);
  }

  @Override
  public void close() {
    closeChannel();
    if (!finished) {
      finished = true;
      Files2.deleteQuietly(temp);
      store.unreserve(size);
    }
  }

  private void closeChannel() {
    if (out == null) {
      return;
    }
    try {
      out.close();
    } catch (IOException ignored) {
      // Nothing to flush on a failed upload.
    }
  }
}
