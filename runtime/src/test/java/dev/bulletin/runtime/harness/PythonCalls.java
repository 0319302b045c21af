package dev.bulletin.runtime.harness;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.protocol.Resources;
import dev.bulletin.protocol.TaskSpec;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Calls encoded by the project's own Python, byte for byte as {@code bulletin.Client} sends
 * them: the functions of {@code encode_calls.py} (beside this class in the test resources)
 * through the Arrow codec. Encode every call a test class needs in one {@link #encode}: one
 * interpreter start.
 */
public final class PythonCalls {

  private static final ObjectMapper JSON = new ObjectMapper();

  private PythonCalls() {}

  /** The interpreter with the bulletin package: BULLETIN_TEST_PYTHON (make test sets it). */
  public static Path python() {
    String configured = System.getenv("BULLETIN_TEST_PYTHON");
    assertNotNull(configured, "set BULLETIN_TEST_PYTHON to a Python with the bulletin package"
        + " (make test does; make build creates .venv)");
    return Path.of(configured);
  }

  /**
   * One call to encode: {@code function} names a function of encode_calls.py; args are JSON
   * values (strings, numbers).
   */
  public record Call(String name, String function, List<Object> args, Optional<Object> returns) {
    public static Call of(String name, String function, Object... args) {
      return new Call(name, function, List.of(args), Optional.empty());
    }

    /** The value the call returns: its encoding is the result object the test expects. */
    public Call returning(Object value) {
      return new Call(name, function, args, Optional.of(value));
    }
  }

  /** An object's bytes and content id (the codec's digest). */
  public record EncodedObject(String id, byte[] bytes) {
    public long size() {
      return bytes.length;
    }

    /** A reference by id, for an object uploaded before the call that names it. */
    public ObjectRef ref() {
      return ObjectRef.newBuilder().setId(id).setSize(bytes.length).build();
    }

    /** A reference carrying the bytes, as the client sends small objects. */
    public ObjectRef inline() {
      return ref().toBuilder().setInlineData(ByteString.copyFrom(bytes)).build();
    }
  }

  /** A call ready to submit, and the result its function returns when one was given. */
  public record EncodedCall(String name, EncodedObject function, EncodedObject args,
      Optional<EncodedObject> result) {

    /** One GPU and one CPU, function and arguments inline: what a small call looks like. */
    public TaskSpec.Builder spec(String taskId) {
      return TaskSpec.newBuilder().setTaskId(taskId).setName(name)
          .setFunction(function.inline()).setArgs(args.inline())
          .setResources(Resources.newBuilder().setGpus(1).setCpus(1));
    }
  }

  /** Encodes the calls with the test interpreter; the objects' files go into {@code folder}. */
  public static Map<String, EncodedCall> encode(Path folder, List<Call> calls) throws Exception {
    Files.createDirectories(folder);
    Path script = folder.resolve("encode_calls.py");
    try (InputStream in = PythonCalls.class.getResourceAsStream("encode_calls.py")) {
      assertNotNull(in, "encode_calls.py is missing from the test resources");
      Files.copy(in, script, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    }
    List<Map<String, Object>> request = new ArrayList<>();
    for (Call call : calls) {
      Map<String, Object> entry = new LinkedHashMap<>();
      entry.put("name", call.name());
      entry.put("function", call.function());
      entry.put("args", call.args());
      call.returns().ifPresent(value -> entry.put("returns", value));
      request.add(entry);
    }
    Path log = folder.resolve("encode_calls.log");
    Process process = new ProcessBuilder(python().toString(), script.toString(), folder.toString())
        .redirectErrorStream(true).redirectOutput(log.toFile()).start();
    try (OutputStream stdin = process.getOutputStream()) {
      JSON.writeValue(stdin, request);
    }
    boolean exited = process.waitFor(2, TimeUnit.MINUTES);
    if (!exited) {
      process.destroyForcibly();
    }
    assertTrue(exited && process.exitValue() == 0, "encode_calls.py failed: "
        + Files.readString(log));
    JsonNode manifest = JSON.readTree(folder.resolve("manifest.json").toFile());
    Map<String, EncodedCall> encoded = new LinkedHashMap<>();
    for (Call call : calls) {
      JsonNode ids = manifest.get(call.name());
      encoded.put(call.name(), new EncodedCall(call.name(),
          read(folder, call.name() + ".function", ids.get("function")),
          read(folder, call.name() + ".args", ids.get("args")),
          ids.has("result") ? Optional.of(read(folder, call.name() + ".result", ids.get("result")))
              : Optional.empty()));
    }
    return encoded;
  }

  private static EncodedObject read(Path folder, String file, JsonNode id) throws IOException {
    return new EncodedObject(id.asText(), Files.readAllBytes(folder.resolve(file)));
  }
}
