package dev.bulletin.bridge;

import static dev.bulletin.bridge.FileObjectStoreTest.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The store reads kind, format and schema from the object's schema message, not its payload. */
class ArrowMetadataTest {

  @TempDir Path folder;

  static byte[] arrowStream(int values) throws Exception {
    Field field = new Field("x", FieldType.nullable(
        new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)), null);
    Schema schema = new Schema(List.of(field),
        Map.of("bulletin.kind", "tensor", "bulletin.format", "1"));
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (BufferAllocator allocator = new RootAllocator();
        VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator);
        ArrowStreamWriter writer = new ArrowStreamWriter(root, null, Channels.newChannel(out))) {
      Float4Vector x = (Float4Vector) root.getVector("x");
      x.allocateNew(values);
      for (int i = 0; i < values; i++) {
        x.set(i, i);
      }
      root.setRowCount(values);
      writer.start();
      writer.writeBatch();
      writer.end();
    }
    return out.toByteArray();
  }

  @Test
  void kindFormatAndSchemaComeFromTheSchemaMessage() throws Exception {
    try (ObjectStore store = ObjectStores.open(new StoreOptions(folder.resolve("m"), 1 << 30, null))) {
      byte[] bytes = arrowStream(1000);
      store.put(key("ada", 1), ByteBuffer.wrap(bytes));
      ObjectInfo info = store.info(key("ada", 1));
      assertEquals("tensor", info.kind());
      assertEquals("1", info.format());
      assertTrue(info.schema().contains("x: FloatingPoint(SINGLE)"), info.schema());
      assertEquals(bytes.length, info.size());
      assertFalse(info.spilled());
    }
  }

  @Test
  void payloadIsNotReadForMetadata() throws Exception {
    // A 2 GiB object whose body is a hole: reading it would take seconds and fail to parse;
    // only the schema message at its front is read.
    Path staged;
    try (ObjectStore store = ObjectStores.open(new StoreOptions(folder.resolve("m"), 4L << 30, null))) {
      byte[] head = arrowStream(4);
      staged = store.stagingFolderOf("ada").resolve(".stage-big");
      try (RandomAccessFile file = new RandomAccessFile(staged.toFile(), "rw")) {
        file.write(head); // a small stream, then 2 GiB of hole
        file.setLength(2L << 30);
      }
      store.adopt(key("ada", 2), staged);
      assertEquals("tensor", store.info(key("ada", 2)).kind());
      assertEquals(2L << 30, store.info(key("ada", 2)).size());
    }
  }

  @Test
  void bytesThatAreNotArrowAreOfUnknownKind() throws Exception {
    try (ObjectStore store = ObjectStores.open(new StoreOptions(folder.resolve("m"), 1 << 20, null))) {
      store.put(key("ada", 3), ByteBuffer.wrap("plain pickle bytes".getBytes()));
      store.put(key("ada", 4), ByteBuffer.wrap(new byte[] {-1, -1, -1, -1, 127, 127, 127, 127, 0}));
      assertEquals("unknown", store.info(key("ada", 3)).kind());
      assertEquals("unknown", store.info(key("ada", 4)).kind());
      assertTrue(Files.exists(store.root().resolve("ada")));
    }
  }
}
