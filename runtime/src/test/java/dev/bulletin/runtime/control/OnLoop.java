package dev.bulletin.runtime.control;

import io.vertx.core.Context;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** Runs a test's action on the control plane's event loop and waits for its answer. */
public final class OnLoop {
  private OnLoop() { }

  public static <T> T call(Context context, Callable<T> action) throws Exception {
    CompletableFuture<T> done = new CompletableFuture<>();
    context.runOnContext(ignored -> {
      try {
        done.complete(action.call());
      } catch (Throwable e) {
        done.completeExceptionally(e);
      }
    });
    return done.get(30, TimeUnit.SECONDS);
  }
}
