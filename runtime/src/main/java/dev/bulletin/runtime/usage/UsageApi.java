package dev.bulletin.runtime.usage;

import dev.bulletin.protocol.UsageReport;
import dev.bulletin.protocol.UsageRequest;
import dev.bulletin.protocol.UsageRow;
import dev.bulletin.runtime.api.Authenticator;
import dev.bulletin.runtime.identity.Identity;
import io.vertx.core.Context;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceName;
import io.vertx.grpc.server.GrpcServer;
import io.vertx.grpc.server.GrpcServerRequest;
import java.time.Instant;
import java.util.Locale;

/**
 * {@code Bulletin.Usage}: the ledger's totals over a period, by user or group. A user gets the
 * rows of their own calls only; the owner and admins get everyone's.
 */
public final class UsageApi {
  private static final ServiceName SERVICE = ServiceName.create("bulletin.v1.Bulletin");
  private final UsageStore store;

  public UsageApi(UsageStore store) {
    this.store = store;
  }

  public void mount(GrpcServer server, Authenticator auth) {
    server.callHandler(Authenticator.method(SERVICE, "Usage", UsageRequest.newBuilder()),
        auth.users(this::usage));
  }

  private void usage(Identity identity, GrpcServerRequest<UsageRequest, UsageReport> request) {
    Context context = io.vertx.core.Vertx.currentContext();
    request.handler(asked -> {
      UsageStore.By by;
      Instant since;
      Instant until;
      try {
        by = by(asked.getBy());
        since = instant(asked.getSince(), "since", Instant.EPOCH);
        until = instant(asked.getUntil(), "until", Instant.now());
        if (!since.isBefore(until)) {
          throw new IllegalArgumentException("since (" + since + ") must be before until ("
              + until + ")");
        }
      } catch (IllegalArgumentException e) {
        request.response().status(GrpcStatus.INVALID_ARGUMENT).statusMessage(e.getMessage())
            .end();
        return;
      }
      String onlyUser = identity.seesAll() ? null : identity.user();
      store.totals(since, until, by, onlyUser).whenComplete((rows, error) ->
          context.runOnContext(ignored -> {
            if (error != null) {
              request.response().status(GrpcStatus.INTERNAL).statusMessage(
                  String.valueOf(error.getMessage())).end();
              return;
            }
            UsageReport.Builder report = UsageReport.newBuilder()
                .setSince(since.toEpochMilli() / 1000.0).setUntil(until.toEpochMilli() / 1000.0)
                .setBy(by.name().toLowerCase(Locale.ROOT)).setAllUsers(onlyUser == null);
            for (UsageTotals row : rows) {
              report.addRows(UsageRow.newBuilder().setUser(row.user()).setGroup(row.group())
                  .setCalls(row.calls()).setGpuSecondsReserved(row.gpuSecondsReserved())
                  .setGpuSecondsBusy(row.gpuSecondsBusy()).setCreditsSpent(row.creditsSpent())
                  .setCreditsEarned(row.creditsEarned()).setQueuedSeconds(row.queuedSeconds())
                  .setRunningSeconds(row.runningSeconds()));
            }
            request.response().end(report.build());
          }));
    });
  }

  private static UsageStore.By by(String by) {
    return switch (by.isEmpty() ? "user" : by) {
      case "user" -> UsageStore.By.USER;
      case "group" -> UsageStore.By.GROUP;
      default -> throw new IllegalArgumentException("by must be 'user' or 'group', got '" + by
          + "'");
    };
  }

  private static Instant instant(double epochSeconds, String field, Instant otherwise) {
    if (epochSeconds == 0) {
      return otherwise;
    }
    if (!(epochSeconds > 0) || !Double.isFinite(epochSeconds)) {
      throw new IllegalArgumentException(field + " must be epoch seconds > 0, got "
          + epochSeconds);
    }
    return Instant.ofEpochMilli((long) (epochSeconds * 1000));
  }
}
