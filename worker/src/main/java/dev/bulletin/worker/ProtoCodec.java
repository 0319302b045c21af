package dev.bulletin.worker;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.MessageLite;
import com.google.protobuf.MessageOrBuilder;
import com.google.protobuf.Parser;
import io.netty.buffer.Unpooled;
import io.vertx.core.internal.buffer.BufferInternal;
import io.vertx.grpc.common.CodecException;
import io.vertx.grpc.common.GrpcMessage;
import io.vertx.grpc.common.GrpcMessageDecoder;
import io.vertx.grpc.common.GrpcMessageEncoder;
import io.vertx.grpc.common.WireFormat;

/**
 * The gRPC message codecs of the runtime's and the agents' streams: Vert.x's own
 * ({@link GrpcMessageEncoder#encoder}, {@link GrpcMessageDecoder#decoder}) less a copy of each
 * protobuf message's bytes. Vert.x's encoder serializes a message and copies the array into a
 * new buffer, which its framing copies again; its decoder copies a received message into a new
 * array to parse it. Those two copies were 13 % of everything the runtime allocated per call
 * (make bench-scale, JFR allocation samples), and allocation is what the collector's pauses
 * follow. Here the serialized array is the payload, and a received message is parsed where it
 * arrived. The parse still copies the fields it keeps (no aliasing), so nothing decoded holds on
 * to the connection's buffer. JSON goes Vert.x's way.
 */
public final class ProtoCodec {

  private ProtoCodec() {}

  public static <T extends MessageLite> GrpcMessageEncoder<T> encoder() {
    GrpcMessageEncoder<T> vertx = GrpcMessageEncoder.encoder();
    return new GrpcMessageEncoder<>() {
      @Override
      public GrpcMessage encode(T message, WireFormat format) throws CodecException {
        if (format != WireFormat.PROTOBUF) {
          return vertx.encode(message, format);
        }
        return GrpcMessage.message("identity",
            BufferInternal.buffer(Unpooled.wrappedBuffer(message.toByteArray())));
      }

      @Override
      public boolean accepts(WireFormat format) {
        return vertx.accepts(format);
      }
    };
  }

  @SuppressWarnings("unchecked")
  public static <T> GrpcMessageDecoder<T> decoder(MessageOrBuilder prototype) {
    GrpcMessageDecoder<T> vertx = GrpcMessageDecoder.decoder(prototype);
    Parser<T> parser = (Parser<T>) prototype.getDefaultInstanceForType().getParserForType();
    return new GrpcMessageDecoder<>() {
      @Override
      public T decode(GrpcMessage message) throws CodecException {
        if (message.format() != WireFormat.PROTOBUF
            || !(message.payload() instanceof BufferInternal payload)) {
          return vertx.decode(message);
        }
        try {
          // A slice of the received bytes; a heap buffer's array is parsed in place.
          return parser.parseFrom(payload.getByteBuf().nioBuffer());
        } catch (InvalidProtocolBufferException e) {
          throw new CodecException(e);
        }
      }

      @Override
      public boolean accepts(WireFormat format) {
        return vertx.accepts(format);
      }
    };
  }
}
