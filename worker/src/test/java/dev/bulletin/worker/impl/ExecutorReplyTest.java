package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectId;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class ExecutorReplyTest {

  private static final String ID = "0123456789abcdef0123456789abcdef";

  @Test
  void parsesEachKind() {
    assertEquals(new ExecutorReply.Finished(ObjectId.parse(ID), 12, true, 0.5, Optional.empty()),
        ExecutorReply.parse("{\"kind\": \"finished\", \"result\": \"" + ID + "\", \"size\": 12,"
            + " \"raised\": true, \"run_seconds\": 0.5}"));
    assertEquals(new ExecutorReply.Finished(ObjectId.parse(ID), 0, false, 0, Optional.of("why")),
        ExecutorReply.parse("{\"kind\": \"finished\", \"result\": \"" + ID + "\", \"size\": 0,"
            + " \"raised\": false, \"run_seconds\": 0, \"retire\": \"why\"}"));
    assertEquals(new ExecutorReply.Finished(ObjectId.parse(ID), 0, false, 0, Optional.empty(),
        4096, -1), ExecutorReply.parse("{\"kind\": \"finished\", \"result\": \"" + ID
            + "\", \"size\": 0, \"raised\": false, \"run_seconds\": 0, \"keeps\": 4096}"));
    assertEquals(new ExecutorReply.Finished(ObjectId.parse(ID), 0, false, 2, Optional.empty(),
        0, 250), ExecutorReply.parse("{\"kind\": \"finished\", \"result\": \"" + ID
            + "\", \"size\": 0, \"raised\": false, \"run_seconds\": 2, \"calls\": 250}"));
    assertEquals(new ExecutorReply.Stage(1 << 20, List.of(ObjectId.parse(ID))),
        ExecutorReply.parse("{\"kind\": \"stage\", \"size\": 1048576, \"mapped\": [\"" + ID
            + "\"]}"));
    assertEquals(new ExecutorReply.Stage(1 << 20, List.of(), true),
        ExecutorReply.parse("{\"kind\": \"stage\", \"size\": 1048576, \"mapped\": [],"
            + " \"spare_ready\": true}"));
    assertEquals(new ExecutorReply.Unfit("OSError(12)"),
        ExecutorReply.parse("{\"kind\": \"unfit\", \"reason\": \"OSError(12)\"}"));
  }

  @Test
  void refusesMalformedRepliesNamingWhatIsWrong() {
    assertMalformed("ok " + ID + " 12 0.5", "not a JSON object");
    assertMalformed("[1, 2]", "not a JSON object");
    assertMalformed("{\"kind\": \"done\"}", "unknown kind 'done'");
    assertMalformed("{\"size\": 1}", "no 'kind'");
    assertMalformed("{\"kind\": \"finished\", \"result\": \"../../etc/passwd\", \"size\": 1,"
        + " \"raised\": false, \"run_seconds\": 0}", "'result' that is not an object id");
    assertMalformed("{\"kind\": \"finished\", \"result\": \"" + ID + "\", \"size\": -1,"
        + " \"raised\": false, \"run_seconds\": 0}", "'size' that is not a non-negative integer");
    assertMalformed("{\"kind\": \"finished\", \"result\": \"" + ID + "\", \"size\": 1.5,"
        + " \"raised\": false, \"run_seconds\": 0}", "'size'");
    assertMalformed("{\"kind\": \"finished\", \"result\": \"" + ID + "\", \"size\": 1,"
        + " \"raised\": \"no\", \"run_seconds\": 0}", "'raised' that is not true or false");
    assertMalformed("{\"kind\": \"finished\", \"result\": \"" + ID + "\", \"size\": 1,"
        + " \"raised\": false, \"run_seconds\": \"NaN\"}", "'run_seconds'");
    assertMalformed("{\"kind\": \"stage\", \"size\": 1, \"mapped\": [\"x\"]}",
        "'mapped' entry that is not an object id: 'x'");
    assertMalformed("{\"kind\": \"unfit\", \"reason\": 3}", "'reason' that is not text");
    assertMalformed("{\"kind\": \"finished\", \"result\": \"" + ID + "\", \"size\": 1,"
        + " \"raised\": false, \"run_seconds\": 0, \"calls\": -3}", "'calls'");
    assertMalformed(null, "empty");
  }

  private static void assertMalformed(String reply, String expected) {
    ExecutorReply.MalformedReplyException error = assertThrows(
        ExecutorReply.MalformedReplyException.class, () -> ExecutorReply.parse(reply));
    assertTrue(error.getMessage().contains(expected), error.getMessage());
  }
}
