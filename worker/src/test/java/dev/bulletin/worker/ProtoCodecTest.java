package dev.bulletin.worker;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.protobuf.ByteString;
import dev.bulletin.protocol.ObjectRef;
import io.vertx.core.buffer.Buffer;
import io.vertx.grpc.common.CodecException;
import io.vertx.grpc.common.GrpcMessage;
import io.vertx.grpc.common.GrpcMessageDecoder;
import io.vertx.grpc.common.WireFormat;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The streams' codecs: the same bytes as Vert.x's, one copy fewer, nothing held. */
class ProtoCodecTest {

  private static final GrpcMessageDecoder<ObjectRef> DECODER =
      ProtoCodec.decoder(ObjectRef.newBuilder());

  private static ObjectRef ref() {
    byte[] data = new byte[4096];
    Arrays.fill(data, (byte) 7);
    return ObjectRef.newBuilder().setId("0123456789abcdef0123456789abcdef").setSize(data.length)
        .setInlineData(ByteString.copyFrom(data)).build();
  }

  @Test
  void encodesTheBytesVertxWouldAndDecodesThemBack() throws Exception {
    GrpcMessage ours = ProtoCodec.<ObjectRef>encoder().encode(ref(), WireFormat.PROTOBUF);
    GrpcMessage vertx = io.vertx.grpc.common.GrpcMessageEncoder.<ObjectRef>encoder()
        .encode(ref(), WireFormat.PROTOBUF);
    assertEquals(vertx.encoding(), ours.encoding());
    assertArrayEquals(vertx.payload().getBytes(), ours.payload().getBytes());
    assertEquals(ref(), DECODER.decode(ours));
  }

  /** A message is parsed from its own bytes only, wherever in the received buffer they sit. */
  @Test
  void decodesAMessageInTheMiddleOfALargerBuffer() throws Exception {
    byte[] bytes = ref().toByteArray();
    Buffer received = Buffer.buffer().appendString("frame before").appendBytes(bytes)
        .appendString("frame after");
    Buffer message = received.slice(12, 12 + bytes.length);
    assertEquals(ref(), DECODER.decode(GrpcMessage.message("identity", message)));
  }

  /** Netty reuses a connection's buffers: what was decoded must not change with them. */
  @Test
  void aDecodedMessageDoesNotShareTheReceivedBytes() throws Exception {
    Buffer received = Buffer.buffer(ref().toByteArray());
    ObjectRef decoded = DECODER.decode(GrpcMessage.message("identity", received));
    received.setBytes(0, new byte[received.length()]);
    assertEquals(ref(), decoded);
  }

  @Test
  void bytesThatAreNoMessageAreACodecError() {
    Buffer garbage = Buffer.buffer(new byte[] {(byte) 0xff, (byte) 0xff, (byte) 0xff});
    assertThrows(CodecException.class,
        () -> DECODER.decode(GrpcMessage.message("identity", garbage)));
  }

  @Test
  void jsonStillGoesVertxsWay() throws Exception {
    Buffer json = Buffer.buffer("{\"id\": \"abc\", \"size\": \"3\"}");
    ObjectRef decoded = DECODER.decode(GrpcMessage.message("identity", WireFormat.JSON, json));
    assertEquals(ObjectRef.newBuilder().setId("abc").setSize(3).build(), decoded);
    GrpcMessage encoded = ProtoCodec.<ObjectRef>encoder().encode(decoded, WireFormat.JSON);
    assertEquals(decoded, DECODER.decode(GrpcMessage.message("identity", WireFormat.JSON,
        encoded.payload())));
  }
}
