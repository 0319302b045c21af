package dev.bulletin.runtime.journal.impl;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.KryoException;
import com.esotericsoftware.kryo.io.Input;
import com.esotericsoftware.kryo.io.Output;
import dev.bulletin.runtime.journal.JournalException;
import dev.bulletin.runtime.journal.JournalRecord;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Consumer;
import java.util.zip.CRC32C;

/**
 * The journal's file format. A file starts with a header: {@code "BLJN"}, u32 format version,
 * u32 kind (1 log, 2 snapshot). Then frames: u32 payload length, u32 CRC32C of the payload, the
 * payload (one Kryo-encoded {@link JournalRecord}), big-endian. A crash mid-write leaves a frame
 * whose length runs past the end or whose CRC does not match: the torn tail.
 */
public final class Frames {
  private Frames() { }

  static final int MAGIC = 0x424c4a4e; // "BLJN"
  /** The format this version writes and reads. Bump it when a record's fields change. */
  public static final int FORMAT = 1;
  static final int KIND_LOG = 1;
  static final int KIND_SNAPSHOT = 2;
  static final int HEADER_BYTES = 12;
  static final int FRAME_OVERHEAD = 8;
  /** No record comes near this: a larger length is damage, not a record. */
  static final int MAX_PAYLOAD = 64 << 20;

  static ByteBuffer header(int kind) {
    return ByteBuffer.allocate(HEADER_BYTES).putInt(MAGIC).putInt(FORMAT).putInt(kind).flip();
  }

  /** Appends one frame for {@code record} to {@code out} (which grows as needed). */
  static void encode(Kryo kryo, Output scratch, JournalRecord record, Output out) {
    scratch.reset();
    kryo.writeClassAndObject(scratch, record);
    int length = scratch.position();
    CRC32C crc = new CRC32C();
    crc.update(scratch.getBuffer(), 0, length);
    writeBigEndian(out, length);
    writeBigEndian(out, (int) crc.getValue());
    out.writeBytes(scratch.getBuffer(), 0, length);
  }

  /** Kryo's own writeInt is little-endian; the frame header is big-endian as the file header. */
  private static void writeBigEndian(Output out, int value) {
    out.writeByte(value >>> 24);
    out.writeByte(value >>> 16);
    out.writeByte(value >>> 8);
    out.writeByte(value);
  }

  /** What reading one file found. */
  record Read(long records, long validBytes, long fileBytes) {
    boolean torn() {
      return validBytes < fileBytes;
    }
  }

  /**
   * Reads a file's frames into {@code sink}, stopping at a torn tail.
   *
   * @throws JournalException for a file of another format or kind, or a frame whose checksum
   *     holds but whose record cannot be read (not a crash: a different bulletin wrote it)
   */
  static Read read(Path file, int kind, Consumer<JournalRecord> sink) throws IOException {
    byte[] bytes = Files.readAllBytes(file);
    if (bytes.length < HEADER_BYTES) {
      return new Read(0, 0, bytes.length); // the crash came before the header was written
    }
    ByteBuffer buffer = ByteBuffer.wrap(bytes).order(ByteOrder.BIG_ENDIAN);
    int magic = buffer.getInt();
    int format = buffer.getInt();
    int fileKind = buffer.getInt();
    if (magic != MAGIC) {
      throw new JournalException(file + " is not a bulletin journal file (no BLJN header);"
          + " move it out of the state directory");
    }
    if (format != FORMAT) {
      throw new JournalException(file + " is a journal of format " + format + ", written by "
          + (format > FORMAT ? "a newer" : "an older") + " bulletin; this one reads format "
          + FORMAT + ". Start the bulletin version that wrote it, or move the folder "
          + file.getParent() + " away to start with an empty state (its calls are then lost)");
    }
    if (fileKind != kind) {
      throw new JournalException(file + " is of kind " + fileKind + ", expected " + kind);
    }
    Kryo kryo = KryoRegistry.POOL.obtain();
    long records = 0;
    try {
      CRC32C crc = new CRC32C();
      while (buffer.remaining() >= FRAME_OVERHEAD) {
        int start = buffer.position();
        int length = buffer.getInt();
        int expected = buffer.getInt();
        if (length < 0 || length > MAX_PAYLOAD || length > buffer.remaining()) {
          return new Read(records, start, bytes.length);
        }
        crc.reset();
        crc.update(bytes, buffer.position(), length);
        if ((int) crc.getValue() != expected) {
          return new Read(records, start, bytes.length);
        }
        JournalRecord record;
        try (Input input = new Input(bytes, buffer.position(), length)) {
          record = (JournalRecord) kryo.readClassAndObject(input);
        } catch (KryoException | ClassCastException e) {
          throw new JournalException(file + " holds a record this bulletin cannot read at byte "
              + start + " (" + e.getMessage() + "); it was written by another version."
              + " Start the bulletin that wrote it, or move " + file.getParent() + " away", e);
        }
        buffer.position(buffer.position() + length);
        sink.accept(record);
        records++;
      }
      return new Read(records, buffer.position(), bytes.length);
    } finally {
      KryoRegistry.POOL.free(kryo);
    }
  }
}
