package dev.bulletin.bridge.impl;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Reads an object's Arrow IPC schema message (a few hundred bytes at the front of the file)
 * without touching the payload: the kind and format the codec put in the schema's metadata.
 */
final class ArrowMetadata {

  static final String KIND_KEY = "bulletin.kind";
  static final String FORMAT_KEY = "bulletin.format";
  /** A schema message larger than this is not one the codec wrote. */
  private static final int MAX_SCHEMA_BYTES = 16 << 20;
  private static final int CONTINUATION = 0xFFFFFFFF;

  record Parsed(String kind, String format, String schema) {
    static final Parsed UNKNOWN = new Parsed("unknown", "", "");
  }

  private ArrowMetadata() {}

  static Parsed read(Path file) {
    try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
      long size = channel.size();
      if (size < 8) {
        return Parsed.UNKNOWN;
      }
      // Check the framing ourselves first: a non-Arrow file would make the reader trust a length
      // read from arbitrary bytes.
      ByteBuffer prefix = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
      while (prefix.hasRemaining() && channel.read(prefix, prefix.position()) > 0) {
        // reads the 8-byte prefix
      }
      prefix.flip();
      if (prefix.getInt(0) != CONTINUATION) {
        return Parsed.UNKNOWN;
      }
      int length = prefix.getInt(4);
      if (length <= 0 || length > MAX_SCHEMA_BYTES || length > size - 8) {
        return Parsed.UNKNOWN;
      }
      channel.position(0);
      Schema schema = MessageSerializer.deserializeSchema(new ReadChannel(channel));
      Map<String, String> metadata = schema.getCustomMetadata();
      String kind = metadata == null ? null : metadata.get(KIND_KEY);
      String format = metadata == null ? null : metadata.get(FORMAT_KEY);
      return new Parsed(kind == null ? "unknown" : kind, format == null ? "" : format,
          schema.toString());
    } catch (IOException | RuntimeException e) {
      return Parsed.UNKNOWN;
    }
  }
}
