package dev.bulletin.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class SizesTest {

  @ParameterizedTest
  @CsvSource({"1024, 1024", "16GiB, 17179869184", "16gib, 17179869184", "512MB, 512000000",
      "1.5KiB, 1536", "2G, 2147483648", "10 B, 10"})
  void parsesWhatPeopleWrite(String text, long bytes) {
    assertEquals(bytes, Sizes.parse("--memory", text));
  }

  @ParameterizedTest
  @ValueSource(strings = {"", "lots", "-1GiB", "16 GiBs"})
  void refusesNonsenseNamingTheOption(String text) {
    IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
        () -> Sizes.parse("--memory", text));
    assertTrue(error.getMessage().startsWith("--memory must be a size"), error.getMessage());
  }
}
