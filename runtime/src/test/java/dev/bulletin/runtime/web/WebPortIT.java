package dev.bulletin.runtime.web;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.bulletin.runtime.BulletinRuntime;
import dev.bulletin.runtime.RuntimeOptions;
import dev.bulletin.runtime.harness.PythonCalls;
import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.WorkerOptions;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The runtime's HTTP port, on a real runtime with two simulated GPUs: the
 * metrics scrape from loopback, the page and its API behind the token, runtime.json naming
 * the dashboard, and --http-port off. Who sees whose calls through the API is tested with real
 * calls in python-client/tests/e2e/test_dashboard.py.
 */
class WebPortIT {
  private static final String OWNER = "owner-token-0123456789";
  private static final WorkerOptions TWO_GPUS = new WorkerOptions("w", PythonCalls.python(),
      GpuInventory.simulated(2), 1, 1L << 30, 0, 60_000, 0,
      WorkerOptions.DEFAULT_EXECUTOR_IDLE_MILLIS, Map.of());

  @TempDir Path home;
  private final HttpClient http = HttpClient.newHttpClient();

  private RuntimeOptions.Builder options() {
    return RuntimeOptions.builder(home, TWO_GPUS).owner(OWNER, "ada")
        .storeFolder(home.resolve("store")).spillFolder(home.resolve("spill"));
  }

  private HttpResponse<String> get(String url, String token) throws Exception {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url))
        .header("Origin", "https://evil.example");
    if (token != null) {
      request.header("Authorization", "Bearer " + token);
    }
    return http.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void servesMetricsThePageAndItsApi() throws Exception {
    try (BulletinRuntime runtime = BulletinRuntime.start(options().build(), () -> { })) {
      String base = runtime.dashboardUrl();
      assertEquals("http://127.0.0.1:" + runtime.httpPort() + "/", base);
      JsonNode state = new ObjectMapper().readTree(Files.readString(home.resolve("runtime.json")));
      assertEquals(base, state.get("dashboard_url").asText());
      assertEquals(runtime.httpPort(), state.get("http_port").asInt());

      HttpResponse<String> metrics = get(base + "metrics", null);
      assertEquals(200, metrics.statusCode(), metrics.body());
      assertTrue(metrics.headers().firstValue("Content-Type").orElse("").startsWith("text/plain"));
      for (String series : new String[] {"bulletin_gpus{state=\"total\",worker=\"w\"} 2.0",
          "bulletin_gpus{state=\"reserved\",worker=\"w\"} 0.0", "bulletin_store_objects ",
          "bulletin_store_bytes{tier=\"memory\"}", "bulletin_dataport_bytes_total ",
          "bulletin_scheduler_pass_seconds_count "}) {
        assertTrue(metrics.body().contains(series), series + " in:\n" + metrics.body());
      }

      HttpResponse<String> page = get(base, null);
      assertEquals(200, page.statusCode());
      assertTrue(page.body().contains("<script src=\"/dashboard.js\""));
      assertTrue(page.headers().firstValue("Content-Security-Policy").isPresent());

      HttpResponse<String> anonymous = get(base + "api/status", null);
      assertEquals(401, anonymous.statusCode());
      HttpResponse<String> wrong = get(base + "api/status", "wrong-token-0123456789");
      assertEquals(401, wrong.statusCode());
      assertTrue(wrong.body().contains("not known to this cluster"), wrong.body());
      HttpResponse<String> owner = get(base + "api/status", OWNER);
      assertEquals(200, owner.statusCode(), owner.body());
      JsonNode status = new ObjectMapper().readTree(owner.body());
      assertEquals(2, status.get("gpus").get("total").asInt());
      // Nothing ran: no utilisation sample yet (null), or, once the usage recorder's first
      // refresh (1 s) has run, a sum of 0 (the start no longer waits for executors, so a slow
      // machine may get here after it).
      JsonNode busy = status.get("workers").get(0).get("gpus").get("busy");
      assertTrue(busy.isNull() || busy.asDouble() == 0.0, busy.toString());
      // No other site's script may read the API with a visitor's token.
      for (HttpResponse<String> response : java.util.List.of(metrics, page, owner, wrong)) {
        assertFalse(response.headers().firstValue("Access-Control-Allow-Origin").isPresent());
      }
      assertEquals(200, get(base + "api/history", OWNER).statusCode());
      assertEquals(200, get(base + "api/usage", OWNER).statusCode());
    }
  }

  @Test
  void httpPortOffServesNothingAndKeepsNoMetrics() throws Exception {
    try (BulletinRuntime runtime = BulletinRuntime.start(
        options().httpPort(RuntimeOptions.HTTP_OFF).build(), () -> { })) {
      assertEquals("", runtime.dashboardUrl());
      assertEquals(0, runtime.httpPort());
    }
  }
}
