package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class UtilisationSamplerTest {

  @Test
  void parsesNvidiaSmiCsvAndSkipsGpusWithoutAReading() {
    Map<Integer, Double> parsed = NvidiaSmiUtilisation.parse(
        "0, GPU-aaaa, 80\n1, GPU-bbbb, [N/A]\n2, GPU-cccc, 5\n\nNo devices were found\n");
    assertEquals(Map.of(0, 0.8, 2, 0.05), parsed);
  }

  @Test
  void attributesAFakeNvidiaSmisUtilisationToTheCallHoldingEachGpu(@TempDir Path dir)
      throws Exception {
    // A FAKE nvidia-smi (this machine has no GPU): GPU 0 at 100 %, GPU 1 at 25 %.
    Path fake = dir.resolve("fake-nvidia-smi");
    Files.writeString(fake, "#!/bin/sh\necho '0, GPU-fake-0, 100'\necho '1, GPU-fake-1, 25'\n");
    Files.setPosixFilePermissions(fake, PosixFilePermissions.fromString("rwxr-xr-x"));
    try (UtilisationSampler sampler = new UtilisationSampler(
        new NvidiaSmiUtilisation(fake.toString()), 2, 100)) {
      sampler.begin("on-0", List.of(0), 0);
      sampler.begin("on-1", List.of(1), 0);
      long start = System.nanoTime();
      Thread.sleep(600);
      assertEquals(Map.of(0, 1.0, 1, 0.25), sampler.current());
      sampler.end("on-0");
      sampler.end("on-1");
      double held = (System.nanoTime() - start) / 1e9;
      double busy0 = sampler.takeBusyGpuSeconds("on-0");
      double busy1 = sampler.takeBusyGpuSeconds("on-1");
      assertTrue(busy0 > 0.5 && busy0 <= held + 0.01, "GPU 0 busy all along: " + busy0);
      assertEquals(busy0 / 4, busy1, 0.05, "GPU 1 a quarter as busy");
      assertEquals(0, sampler.takeBusyGpuSeconds("on-0"), "taken once");
    }
  }

  /** Stands in for an nvidia-smi that does not answer: every periodic sample blocks. */
  private static final class StuckSource implements UtilisationSource {
    final CountDownLatch release = new CountDownLatch(1);
    final Semaphore entered = new Semaphore(0);
    final AtomicInteger samples =
        new AtomicInteger();

    @Override
    public Map<Integer, Double> sample(Collection<Holder> holders) {
      samples.incrementAndGet();
      entered.release();
      try {
        release.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return Map.of(0, 1.0);
    }

    @Override
    public String name() {
      return "stuck";
    }
  }

  @Test
  void aCallEndsWithoutWaitingForASampleThatTakesAProcess() throws Exception {
    StuckSource stuck = new StuckSource();
    try (UtilisationSampler sampler = new UtilisationSampler(stuck, 1, 20)) {
      sampler.begin("short", List.of(0), 0);
      assertTrue(stuck.entered.tryAcquire(30, TimeUnit.SECONDS),
          "the periodic sample started");
      Thread ending = new Thread(() -> sampler.end("short"));
      ending.start();
      ending.join(30_000);
      boolean endedWhileStuck = !ending.isAlive();
      stuck.release.countDown();
      ending.join();
      assertTrue(endedWhileStuck, "the call's end waited for the periodic sample");
      assertEquals(1, stuck.samples.get(), "the call's end started no sample of its own");
      assertEquals(0, sampler.takeBusyGpuSeconds("short"),
          "no sample finished while it ran: nothing to charge");
    }
  }

  @Test
  void aCpuCallIsNotSampled() {
    try (UtilisationSampler sampler = new UtilisationSampler(new SimulatedUtilisation(), 1, 50)) {
      sampler.begin("cpu", List.of(), ProcessHandle.current().pid());
      sampler.end("cpu");
      assertEquals(0, sampler.takeBusyGpuSeconds("cpu"));
    }
  }
}
