package dev.bulletin.runtime.scheduler.snapshot;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * How close each pair of a worker's GPUs sit: on NVLink, behind one PCIe switch, or only through
 * the host. Workers report it from {@code nvidia-smi topo -m} ({@link #parseNvidiaSmi}); tests
 * and simulations build one with {@link #builder}. GPU ids are the worker's CUDA indices 0..n-1.
 */
public final class GpuTopology {

  /** A pair's connection, closest first; {@link #distance()} orders them. */
  public enum Link {
    NVLINK(1), PCIE_SWITCH(2), HOST(3);

    private final int distance;

    Link(int distance) {
      this.distance = distance;
    }

    public int distance() {
      return distance;
    }

    static Link ofDistance(int distance) {
      return distance == 1 ? NVLINK : distance == 2 ? PCIE_SWITCH : HOST;
    }
  }

  public static final int MAX_GPUS = 64;

  private final int gpus;
  private final byte[] distances;
  /** Every pass groups a thousand workers by topology: hashed once, not per pass. */
  private final int hash;

  private GpuTopology(int gpus, byte[] distances) {
    this.gpus = gpus;
    this.distances = distances;
    this.hash = 31 * gpus + Arrays.hashCode(distances);
  }

  /** Every pair joined the same way: a worker that reports no topology gets {@code HOST}. */
  public static GpuTopology uniform(int gpus, Link link) {
    return builder(gpus).all(link).build();
  }

  public static Builder builder(int gpus) {
    return new Builder(gpus);
  }

  public int gpus() {
    return gpus;
  }

  public Link link(int a, int b) {
    return Link.ofDistance(distance(a, b));
  }

  /** 0 for a GPU with itself, else {@link Link#distance()}. */
  public int distance(int a, int b) {
    return distances[a * gpus + b];
  }

  /**
   * Reads the GPU rows of {@code nvidia-smi topo -m}: {@code NV#} is NVLink, {@code PIX} and
   * {@code PXB} are PCIe switches, {@code PHB}, {@code NODE} and {@code SYS} go through the host.
   */
  public static GpuTopology parseNvidiaSmi(String output) {
    List<String[]> rows = new ArrayList<>();
    for (String line : output.split("\n")) {
      String[] cells = line.trim().split("\\s+");
      // GPU rows only: GPUk's row has "X" in column k (the header also starts with "GPU0").
      if (cells[0].matches("GPU\\d+")) {
        int self = Integer.parseInt(cells[0].substring(3));
        if (cells.length <= self + 1 || !cells[self + 1].equals("X")) {
          continue;
        }
        rows.add(cells);
      }
    }
    Builder builder = builder(rows.size());
    for (int a = 0; a < rows.size(); a++) {
      String[] cells = rows.get(a);
      if (cells.length < rows.size() + 1) {
        throw new IllegalArgumentException("nvidia-smi topo -m: row " + cells[0] + " has "
            + (cells.length - 1) + " cells, expected " + rows.size());
      }
      for (int b = 0; b < rows.size(); b++) {
        String cell = cells[b + 1].toUpperCase(Locale.ROOT);
        if (a == b) {
          continue;
        }
        Link link = cell.startsWith("NV") ? Link.NVLINK
            : cell.equals("PIX") || cell.equals("PXB") ? Link.PCIE_SWITCH : Link.HOST;
        builder.link(a, b, link);
      }
    }
    return builder.build();
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof GpuTopology that && gpus == that.gpus
        && Arrays.equals(distances, that.distances);
  }

  @Override
  public int hashCode() {
    return hash;
  }

  @Override
  public String toString() {
    StringBuilder text = new StringBuilder("GpuTopology[" + gpus + " GPUs");
    for (int a = 0; a < gpus; a++) {
      for (int b = a + 1; b < gpus; b++) {
        if (distance(a, b) < Link.HOST.distance()) {
          text.append(", ").append(a).append('-').append(b).append(' ').append(link(a, b));
        }
      }
    }
    return text.append(']').toString();
  }

  /** Pairs not named stay {@code HOST}; a closer link always wins over a farther one. */
  public static final class Builder {
    private final int gpus;
    private final byte[] distances;

    private Builder(int gpus) {
      if (gpus < 0 || gpus > MAX_GPUS) {
        throw new IllegalArgumentException("gpus must be 0.." + MAX_GPUS + ", got " + gpus);
      }
      this.gpus = gpus;
      this.distances = new byte[gpus * gpus];
      all(Link.HOST);
    }

    public Builder all(Link link) {
      for (int a = 0; a < gpus; a++) {
        for (int b = 0; b < gpus; b++) {
          distances[a * gpus + b] = (byte) (a == b ? 0 : link.distance());
        }
      }
      return this;
    }

    public Builder link(int a, int b, Link link) {
      check(a);
      check(b);
      if (a != b) {
        byte distance = (byte) Math.min(distances[a * gpus + b], link.distance());
        distances[a * gpus + b] = distance;
        distances[b * gpus + a] = distance;
      }
      return this;
    }

    /** Pairs given flat: {@code nvlinkPairs(0, 1, 2, 3)} links 0-1 and 2-3. */
    public Builder nvlinkPairs(int... flatPairs) {
      if (flatPairs.length % 2 != 0) {
        throw new IllegalArgumentException("nvlinkPairs takes pairs, got " + flatPairs.length
            + " ids");
      }
      for (int i = 0; i < flatPairs.length; i += 2) {
        link(flatPairs[i], flatPairs[i + 1], Link.NVLINK);
      }
      return this;
    }

    /** These GPUs share one PCIe switch. */
    public Builder pcieSwitch(int... ids) {
      for (int a : ids) {
        for (int b : ids) {
          link(a, b, Link.PCIE_SWITCH);
        }
      }
      return this;
    }

    private void check(int id) {
      if (id < 0 || id >= gpus) {
        throw new IllegalArgumentException("GPU id " + id + " is outside 0.." + (gpus - 1));
      }
    }

    public GpuTopology build() {
      return new GpuTopology(gpus, distances.clone());
    }
  }
}
