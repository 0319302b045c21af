package dev.bulletin.runtime.web;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.bulletin.runtime.PortInUseException;
import dev.bulletin.runtime.api.StatusReport;
import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.metrics.ClusterMeters;
import dev.bulletin.runtime.metrics.GpuHistory;
import dev.bulletin.worker.tls.TlsOptions;
import dev.bulletin.worker.tls.TlsSetup;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.function.Function;

/**
 * The runtime's HTTP port: Prometheus metrics at {@code /metrics}, the dashboard's page at
 * {@code /} and its JSON API under {@code /api/} (docs/observability.md). Same bind address and
 * TLS as the gRPC API. Handlers run on the control plane's event loop (the server is created by
 * its verticle), so they read the plane directly. No CORS headers: the page calls its own
 * origin only, and no other site's script may read the API with a visitor's token.
 */
public final class WebPort {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String ASSETS = "/dev/bulletin/runtime/web/";
  /** The page loads only its own script and style, and may be framed by nobody. */
  private static final String CSP = "default-src 'none'; script-src 'self'; style-src 'self';"
      + " img-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none';"
      + " form-action 'none'";

  private final WebAccess access;
  private final PrometheusMeterRegistry prometheus;
  private final ClusterMeters meters;
  private final DashboardJson dashboard;
  private HttpServer server;

  public WebPort(WebAccess access, PrometheusMeterRegistry prometheus, ClusterMeters meters,
      ControlPlane plane, StatusReport status, GpuHistory history, long historyIntervalMillis) {
    this.access = access;
    this.prometheus = prometheus;
    this.meters = meters;
    this.dashboard = new DashboardJson(plane, status, prometheus, history,
        historyIntervalMillis);
  }

  /** Listens on host:port (0: any free); a taken port fails naming {@code --http-port}. */
  public Future<WebPort> listen(Vertx vertx, String host, int port, TlsOptions tls) {
    Router router = Router.router(vertx);
    router.route().handler(context -> {
      context.response().putHeader("X-Content-Type-Options", "nosniff")
          .putHeader("Referrer-Policy", "no-referrer").putHeader("Content-Security-Policy", CSP);
      context.next();
    });
    router.get("/").handler(asset("index.html", "text/html; charset=utf-8"));
    router.get("/dashboard.js").handler(asset("dashboard.js", "text/javascript; charset=utf-8"));
    router.get("/dashboard.css").handler(asset("dashboard.css", "text/css; charset=utf-8"));
    router.get("/metrics").handler(this::metrics);
    router.get("/api/whoami").handler(api(dashboard::whoami));
    router.get("/api/status").handler(api(dashboard::status));
    router.get("/api/usage").handler(api(dashboard::usage));
    router.get("/api/history").handler(api(viewer -> dashboard.history()));
    server = vertx.createHttpServer(TlsSetup.serve(new HttpServerOptions().setHost(host)
        .setPort(port), tls));
    return server.requestHandler(router).listen()
        .recover(error -> Future.failedFuture(PortInUseException.explain(error, host, port,
            "--http-port")))
        .map(listening -> this);
  }

  public int actualPort() {
    return server.actualPort();
  }

  public Future<Void> close() {
    return server == null ? Future.succeededFuture() : server.close();
  }

  private void metrics(RoutingContext context) {
    WebAccess.Decision decision = access.metrics(
        WebAccess.loopback(context.request().remoteAddress().hostAddress()),
        context.request().getHeader("Authorization"));
    if (decision instanceof WebAccess.Decision.Refused refused) {
      refuse(context.response(), refused);
      return;
    }
    meters.refresh();
    context.response().putHeader("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        .putHeader("Cache-Control", "no-store").end(prometheus.scrape());
  }

  private io.vertx.core.Handler<RoutingContext> api(Function<Identity, Object> body) {
    return context -> {
      WebAccess.Decision decision = access.user(context.request().getHeader("Authorization"));
      if (decision instanceof WebAccess.Decision.Refused refused) {
        refuse(context.response(), refused);
        return;
      }
      Object json = body.apply(((WebAccess.Decision.Allowed) decision).identity());
      try {
        context.response().putHeader("Content-Type", "application/json")
            .putHeader("Cache-Control", "no-store").end(JSON.writeValueAsString(json));
      } catch (IOException e) {
        context.fail(e);
      }
    };
  }

  private static void refuse(HttpServerResponse response, WebAccess.Decision.Refused refused) {
    if (refused.status() == 401) {
      response.putHeader("WWW-Authenticate", "Bearer realm=\"bulletin\"");
    }
    response.setStatusCode(refused.status()).putHeader("Content-Type", "application/json")
        .putHeader("Cache-Control", "no-store")
        .end(JSON.createObjectNode().put("error", refused.message()).toString());
  }

  private static io.vertx.core.Handler<RoutingContext> asset(String name, String type) {
    Buffer bytes = Buffer.buffer(read(name));
    return context -> context.response().putHeader("Content-Type", type)
        .putHeader("Cache-Control", "no-cache").end(bytes);
  }

  private static byte[] read(String name) {
    try (InputStream in = WebPort.class.getResourceAsStream(ASSETS + name)) {
      if (in == null) {
        throw new IllegalStateException("the runtime jar lacks " + ASSETS + name);
      }
      return in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
