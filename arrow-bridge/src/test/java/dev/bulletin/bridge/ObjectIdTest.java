package dev.bulletin.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class ObjectIdTest {

  @Test
  void anIdIs32Or64LowercaseHexDigits() {
    assertTrue(ObjectId.isValid("0123456789abcdef".repeat(2)));
    assertTrue(ObjectId.isValid("fedcba9876543210".repeat(4)));
    assertEquals("0123456789abcdef".repeat(2), ObjectId.parse("0123456789abcdef".repeat(2)).hex());
  }

  @Test
  void anythingElseIsRefusedSayingWhatAnIdIs() {
    for (String bad : new String[] {null, "", "0".repeat(31), "0".repeat(33), "0".repeat(48),
        "0123456789ABCDEF".repeat(2), "0123456789abcdeg".repeat(2), "../" + "0".repeat(29)}) {
      assertFalse(ObjectId.isValid(bad), bad);
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> ObjectId.parse(bad));
      assertTrue(e.getMessage().contains("32 lowercase hex digits"), e.getMessage());
    }
  }
}
